"""PostgresOwnerState.requests: a cycle's stored requests in one read, the same answers as
one read per request (request() is the reference)."""

from __future__ import annotations

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.logged_events import a_job, logged

pytestmark = pytest.mark.integration


def test_the_requests_of_many_jobs_are_read_at_once_as_one_by_one(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(3, "o")
    jobs = [a_job() for _ in range(5)]
    events, _ = logged([e for job in jobs for e in job.collect_events()])
    state.apply(3, claim.epoch, events, [])
    taken = [(job.id, str(e.record["request_id"])) for job, e in zip(jobs, events, strict=True)]
    # Not taken: an unknown id on a known job, and a taken id paired with another job.
    keys = [*taken, (jobs[0].id, "never-sent"), (jobs[1].id, taken[0][1])]
    found = state.requests(keys)
    assert set(found) == set(taken)
    assert found == {key: state.request(*key) for key in taken}
    assert state.requests([]) == {}
