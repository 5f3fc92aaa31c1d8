"""A dead letter's re-drive (domain/run_redrive.py): a new series of attempts under the run's
own id, numbered on from its last attempt, counted afresh by the retry policy."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest

from cronlog.domain.job import Job
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.run import Run
from cronlog.domain.run_redrive import RunNotDeadLettered
from cronlog.domain.spec import JobSpec

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SPEC = JobSpec(name="n", tenant="t", queue="default", handler="echo", cron="0 * * * *")
POLICY = RetryPolicy(max_attempts=2, initial_backoff=timedelta(seconds=1), jitter=0.0)
TIMEOUT = timedelta(seconds=30)


def dead_letter() -> Run:
    run = Job.create(uuid4(), SPEC, "r1", NOW).fire(NOW)
    for attempt in (1, 2):
        assert run.fail(attempt, "w", NOW, "Boom: no", b"", False, NOW, POLICY, TIMEOUT, 0.5)
    assert run.status == "dead_lettered"
    run.collect_events()
    return run


def test_a_redrive_dispatches_the_next_attempt_now_and_names_who_asked() -> None:
    run = dead_letter()
    later = NOW + timedelta(hours=1)
    run.redrive("req-9", "acme", TIMEOUT, later)
    assert (run.status, run.attempt, run.attempt_status, run.not_before) == (
        "scheduled", 3, "dispatched", later)
    # eventsourcing makes the events' classes from the aggregate's methods: their fields
    # are not declared anywhere a type checker looks.
    events: Sequence[Any] = run.collect_events()
    redriven, dispatched = events
    assert type(redriven).__name__ == "RunRedriven"
    assert (redriven.request_id, redriven.requested_by, redriven.attempts_before) == (
        "req-9", "acme", 2)
    assert type(dispatched).__name__ == "AttemptDispatched" and dispatched.attempt == 3
    assert dispatched.timeout_ms == 30_000


def test_the_retry_policy_counts_the_new_series_afresh() -> None:
    run = dead_letter()
    run.redrive("req-9", "acme", TIMEOUT, NOW)
    assert run.fail(3, "w", NOW, "Boom: again", b"", False, NOW, POLICY, TIMEOUT, 0.5)
    assert (run.status, run.attempt) == ("scheduled", 4), "attempt 1 of the new series retried"
    assert run.fail(4, "w", NOW, "Boom: still", b"", False, NOW, POLICY, TIMEOUT, 0.5)
    assert run.status == "dead_lettered"
    last: Any = run.collect_events()[-1]
    reason = last.reason
    assert reason == ("attempt 2 of 2 since the re-drive after attempt 2 failed: Boom: still")
    # A second re-drive goes on from there.
    run.redrive("req-10", "acme", TIMEOUT, NOW)
    assert run.attempt == 5 and run.attempt_base == 4
    assert run.succeed(5, "w", NOW, b"ok", False, NOW)
    assert run.status == "succeeded"


@pytest.mark.parametrize("end", ["running", "succeeded", "cancelled"])
def test_only_a_dead_letter_is_redriven(end: str) -> None:
    run = Job.create(uuid4(), SPEC, "r1", NOW).fire(NOW)
    if end != "cancelled":
        run.start(1, "w", NOW, NOW)
    if end == "succeeded":
        run.succeed(1, "w", NOW, b"", False, NOW)
    if end == "cancelled":
        run.cancel("by request x", NOW)
    run.collect_events()
    with pytest.raises(RunNotDeadLettered, match="not dead-lettered"):
        run.redrive("req-9", "acme", TIMEOUT, NOW)
    assert run.collect_events() == []


def test_a_redriven_run_rebuilds_from_its_events() -> None:
    run = Job.create(uuid4(), SPEC, "r1", NOW).fire(NOW)
    for attempt in (1, 2):
        run.fail(attempt, "w", NOW, "Boom: no", b"", False, NOW, POLICY, TIMEOUT, 0.5)
    run.redrive("req-9", "acme", TIMEOUT, NOW)
    replayed: Run | None = None
    for event in run.collect_events():
        replayed = event.mutate(replayed)
    assert replayed is not None
    assert (replayed.status, replayed.attempt, replayed.attempt_base) == ("scheduled", 3, 2)
