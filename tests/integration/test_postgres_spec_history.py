"""The job_specs table (issue 38): each spec an update or a restore replaced is kept by the
version of the event it came from, whether it was set in the same batch or an earlier one;
PostgresSpecHistory gives the spec in force at any version."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from cronlog.infra.postgres.spec_history import PostgresSpecHistory
from tests.support.clock import T0
from tests.support.logged_events import a_job, logged

pytestmark = pytest.mark.integration


def test_every_replaced_spec_is_kept_and_read_back_by_version(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    history = PostgresSpecHistory(isolated.postgres_dsn)
    claim = state.take_epoch(2, "o")
    job = a_job()
    v1 = job.spec
    v2 = replace(v1, payload=b"v2")
    v3 = replace(v1, payload=b"v3")
    # Created and updated in one batch: the created spec is kept from the batch.
    job.update(v2, "u1", T0 + timedelta(seconds=1))
    first, _ = logged(list(job.collect_events()))
    state.apply(2, claim.epoch, first, [])
    job.pause("p", T0 + timedelta(seconds=2))
    job.update(v3, "u2", T0 + timedelta(seconds=3))
    job.delete("d", T0 + timedelta(seconds=4))
    # Updated in a later batch: the spec the row held is kept from the store.
    later, _ = logged(list(job.collect_events()), first_offset=len(first))
    state.apply(2, claim.epoch, later, [])
    versions = {e.name: int(e.record["version"]) for e in [*first, *later]
                if e.name in ("JobCreated", "JobPaused", "JobDeleted")}
    updates = [int(e.record["version"]) for e in [*first, *later] if e.name == "JobUpdated"]
    assert history.spec_at(job.id, versions["JobCreated"]) == v1
    assert history.spec_at(job.id, updates[0]) == v2
    assert history.spec_at(job.id, versions["JobPaused"]) == v2, "a pause keeps the spec"
    assert history.spec_at(job.id, updates[1]) == v3
    assert history.spec_at(job.id, versions["JobDeleted"]) == v3

    # Restored to version 1: the v3 it replaces is kept too, and the current one is v1.
    job.restore_to(1, v1, "r", T0 + timedelta(seconds=5))
    restored, _ = logged(list(job.collect_events()), first_offset=len(first) + len(later))
    state.apply(2, claim.epoch, restored, [])
    assert history.spec_at(job.id, int(restored[0].record["version"])) == v1
    assert history.spec_at(job.id, updates[1]) == v3
    row = state.job(job.id)
    assert row is not None and row.status == "active"
    history.close()
