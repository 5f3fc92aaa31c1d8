"""A second creation (RunMissed, RunSkipped, RunScheduled) of a run the history already holds,
newer than what it holds, is set aside (DESIGN invariant 9): it fails only itself, and the
run keeps its attempts, whatever batches or restart the events came through.

Found by test_projector_property.py: the projector used to fold such an event as a new run
without attempts. Batched with the attempts before it, attempt 1's row was never written;
one by one, it was written at v3 and stayed (ReplacingMergeTree cannot take a row back), so
what GetRun showed depended on the batching."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronlog.ports import InboundMessage
from cronlog.projections.history import HistoryProjector, RunCreatedTwice
from tests.support.clickhouse_history import ClickHouseLikeHistory
from tests.support.history_loop import Feed, Rejected
from tests.support.history_property import (
    history_loop,
    runs_as_read,
    split,
)

RUN = "5d92f485-7e55-5889-8c67-d2804097ff42"
JOB = "1893428c-789c-5832-a201-20774efec1e0"
FIRE_TIME = datetime(2026, 1, 1, 7, tzinfo=UTC)
T0 = datetime(2026, 1, 1, tzinfo=UTC)

Event = tuple[str, dict[str, Any]]


def created(name: str, version: int, at: datetime = T0) -> Event:
    record: dict[str, Any] = {"run_id": RUN, "job_id": JOB, "version": version, "at": at,
                              "tenant": "t", "queue": "q", "handler": "h",
                              "scheduled_at": FIRE_TIME, "reason": "overlap"}
    if name == "RunScheduled":
        record.update(not_before=FIRE_TIME, trigger="schedule", max_attempts=3, attempt=0,
                      timeout_ms=1000)
    return name, record


def attempt(name: str, version: int, number: int) -> Event:
    record: dict[str, Any] = {"run_id": RUN, "job_id": JOB, "version": version, "at": T0,
                              "attempt": number, "not_before": T0, "timeout_ms": 1000,
                              "worker": "w", "started_at": T0 + timedelta(seconds=1),
                              "reason": "lost"}
    return name, record


# The found case, pared down: the run, attempt 1 dispatched, a forged RunMissed at v4, then
# attempt 1 started (also v4: newer than the run's v3) and lost, and attempt 2.
LOG: list[Event] = [
    created("RunMissed", 1),
    attempt("AttemptWaiting", 2, 1),
    attempt("AttemptDispatched", 3, 1),
    created("RunMissed", 4, at=datetime(2000, 1, 1, tzinfo=UTC)),  # forged: offset 3
    attempt("AttemptStarted", 4, 1),
    attempt("AttemptLost", 5, 1),
    attempt("AttemptDispatched", 6, 2),
    attempt("AttemptStarted", 7, 2),
    created("RunMissed", 1),  # redelivered: changes nothing, is not set aside
]
FORGED = 3
EXPECTED = {(RUN, 1): ("running", "lost", 7), (RUN, 2): ("running", "running", 7)}


def read(events: list[Event]) -> list[InboundMessage]:
    return [InboundMessage("run-events", 0, offset, name, record, b"")
            for offset, (name, record) in enumerate(events)]


def attempts_as_read(store: ClickHouseLikeHistory) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {k: (r.run_status, r.attempt_status, r.version)
            for k, r in runs_as_read(store).items()}


def project(batches: list[list[InboundMessage]], restart_before: int | None = None
            ) -> tuple[ClickHouseLikeHistory, Rejected]:
    store, rejected = ClickHouseLikeHistory(), Rejected()
    feed = Feed(list(batches))
    loop = history_loop(feed, store, rejected)
    for number in range(len(batches)):
        if number == restart_before:
            loop = history_loop(feed, store, rejected)  # knows the run only from its rows
        loop.step()
    return store, rejected


# Where the log is cut into batches.
BATCHINGS = {
    "one batch": [],
    "one by one": list(range(1, len(LOG))),
    "attempt 1 stored before the forged creation": [FORGED],
    "forged creation alone": [FORGED, FORGED + 1],
}


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
@pytest.mark.parametrize("batching", list(BATCHINGS))
def test_a_forged_creation_is_set_aside_and_the_run_keeps_its_attempts(
        batching: str, restart: bool) -> None:
    batches = split(read(LOG), BATCHINGS[batching])
    # Restarted: the projector that meets the forged event knows the run only from its rows.
    with_forged = next(i for i, b in enumerate(batches) if any(m.offset == FORGED for m in b))
    store, rejected = project(batches, restart_before=with_forged if restart else None)
    assert [(m.offset, error.split(":")[0]) for m, error in rejected.aside] == [
        (FORGED, "RunCreatedTwice")]
    assert attempts_as_read(store) == EXPECTED
    assert [(e.event_type, e.version) for e in store.run_events].count(("RunMissed", 4)) == 0


def test_the_forged_creation_after_a_restart_is_refused_from_the_stored_rows() -> None:
    """The restarted projector has not seen the run: it must ask the store, although the
    batch holds a creation of the run, or it would take the forged event for a new run."""
    store = ClickHouseLikeHistory()
    HistoryProjector(store).apply_batch(LOG[:3])
    restarted = HistoryProjector(store)
    with pytest.raises(RunCreatedTwice, match=r"RunMissed v4 .* already holds at v3"):
        restarted.apply_batch([LOG[FORGED]])
    restarted.apply_batch([created("RunMissed", 1), attempt("AttemptStarted", 4, 1)])
    assert attempts_as_read(store) == {(RUN, 1): ("running", "running", 4)}


@pytest.mark.parametrize("name", ["RunScheduled", "RunMissed", "RunSkipped"])
def test_every_creation_event_of_a_held_run_is_refused_when_newer(name: str) -> None:
    store = ClickHouseLikeHistory()
    projector = HistoryProjector(store)
    projector.apply_batch([created("RunScheduled", 1), attempt("AttemptDispatched", 2, 1)])
    with pytest.raises(RunCreatedTwice):
        projector.apply_batch([created(name, 3)])
    projector.apply_batch([created(name, 2), created(name, 1)])  # redelivered: no change
    assert attempts_as_read(store) == {(RUN, 1): ("scheduled", "dispatched", 2)}


OTHER_JOB = "07ad935f-39d8-5d83-8dc1-8f766475beec"


def under_other_job(name: str, version: int) -> Event:
    """A creation of RUN naming another job and tenant, with chain fields of its own (what
    the projector property found: a RunScheduled v3 with a depth and upstream runs)."""
    event_name, record = created(name, version)
    record.update(job_id=OTHER_JOB, tenant="other", depth=13, cascade="",
                  logical_time=T0, upstream_run_ids=[JOB])
    return event_name, record


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
@pytest.mark.parametrize("version", [1, 3, 9], ids=["older", "same", "newer"])
@pytest.mark.parametrize("name", ["RunScheduled", "RunMissed", "RunSkipped"])
def test_a_creation_of_a_held_run_under_another_job_is_set_aside(
        name: str, version: int, restart: bool) -> None:
    """Before, a restarted projector asked the store for the run by (job, run): under the
    forged event's job it found nothing and stored a second run, of another tenant, where a
    running one took the event for a redelivery (older) or set it aside (newer)."""
    log = [created("RunScheduled", 1), attempt("AttemptDispatched", 2, 1),
           attempt("AttemptStarted", 3, 1), under_other_job(name, version)]
    store, rejected = project(split(read(log), [3]), restart_before=1 if restart else None)
    assert [(m.offset, error.split(":")[0]) for m, error in rejected.aside] == [
        (3, "RunCreatedTwice")]
    assert {(r.job_id, r.tenant, r.depth) for r in store.runs} == {(JOB, "t", 0)}
    assert attempts_as_read(store) == {(RUN, 1): ("running", "running", 3)}
    assert {e.job_id for e in store.run_events} == {JOB}
