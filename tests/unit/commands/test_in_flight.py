from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from cronlog.commands.owner.in_flight import CycleOccupancy, InFlight, InFlightRuns

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=2)


def due(tenant: str, seconds: float | None, partition: int = 0,
        job: UUID | None = None) -> InFlight:
    """A run of the tenant whose attempt is due `seconds` from NOW; None: it is running."""
    at = None if seconds is None else (NOW + timedelta(seconds=seconds)).timestamp()
    return InFlight(tenant, partition, job or uuid4(), at)


def test_counts_by_tenant_follow_every_change() -> None:
    runs = InFlightRuns(WINDOW)
    a, b, c = uuid4(), uuid4(), uuid4()
    job = uuid4()
    runs.put(a, due("t1", 0, 0, job))
    runs.put(b, due("t1", 0, 1, job))
    runs.put(c, due("t2", 0, 1, job))
    assert runs.by_tenant() == {"t1": 2, "t2": 1}
    runs.put(a, due("t1", None, 0, job))  # the same run again, started: still one
    assert runs.by_tenant() == {"t1": 2, "t2": 1} and len(runs) == 3
    runs.discard(b)
    runs.discard(b)  # gone already: nothing changes
    assert runs.by_tenant() == {"t1": 1, "t2": 1}
    runs.drop_partitions({1})
    assert runs.by_tenant() == {"t1": 1} and c not in runs and a in runs
    assert runs.a_job_of("t1") == job and runs.a_job_of("t2") is None
    assert runs.tenants() == ["t1"]


def test_a_copy_of_the_counts_is_the_callers() -> None:
    runs = InFlightRuns(WINDOW)
    runs.put(uuid4(), due("t", 0))
    counts = runs.by_tenant()
    counts["t"] += 5
    assert runs.by_tenant() == {"t": 1}


def test_runs_enqueued_for_later_do_not_occupy_now() -> None:
    runs = InFlightRuns(WINDOW)
    runs.put(uuid4(), due("t", None))  # running
    runs.put(uuid4(), due("t", -30))  # late: a worker is about to start it, or busy
    runs.put(uuid4(), due("t", 1.5))  # within the lookahead: about to start
    for seconds in (10, 30, 30.5, 59):  # a minute's every-minute jobs, enqueued ahead
        runs.put(uuid4(), due("t", seconds))
    assert runs.by_tenant()["t"] == 7
    assert runs.occupying("t", NOW, NOW) == 3
    # Around 30 s from now: those three, and the two due within the window of it.
    assert runs.occupying("t", NOW, NOW + timedelta(seconds=30)) == 5
    assert runs.occupying("t", NOW, NOW + timedelta(seconds=45)) == 3
    # A time already past counts as now.
    assert runs.occupying("t", NOW, NOW - timedelta(hours=1)) == 3
    assert runs.occupying("nobody", NOW, NOW) == 0


def test_a_retry_waiting_for_its_backoff_counts_only_once_it_is_near() -> None:
    runs = InFlightRuns(WINDOW)
    run_id = uuid4()
    runs.put(run_id, due("t", 300))
    assert runs.occupying("t", NOW, NOW) == 0
    assert runs.occupying("t", NOW + timedelta(seconds=299), NOW + timedelta(seconds=299)) == 1


def test_a_cycle_lays_its_changes_over_the_committed_runs() -> None:
    from cronlog.domain.run import Run

    class FakeRun:
        """The fields of a Run that occupancy reads."""

        def __init__(self, run_id: UUID, tenant: str, status: str, not_before: datetime,
                     finished: bool = False) -> None:
            self.id, self.tenant, self.status = run_id, tenant, status
            self.not_before, self.finished, self.job_id = not_before, finished, uuid4()

    def run(run_id: UUID, status: str, seconds: float, finished: bool = False) -> Run:
        fake = FakeRun(run_id, "t", status, NOW + timedelta(seconds=seconds), finished)
        return fake  # type: ignore[return-value]

    runs = InFlightRuns(WINDOW)
    ending, starting = uuid4(), uuid4()
    runs.put(ending, due("t", None))
    runs.put(starting, due("t", 20))
    cycle = CycleOccupancy(runs, WINDOW)
    assert cycle.occupying("t", NOW, NOW) == 1
    cycle.update(run(ending, "succeeded", 0, finished=True))
    assert cycle.occupying("t", NOW, NOW) == 0
    cycle.update(run(starting, "running", 20))  # started early: occupies now
    assert cycle.occupying("t", NOW, NOW) == 1
    created = uuid4()
    cycle.update(run(created, "scheduled", 40))
    assert cycle.occupying("t", NOW, NOW + timedelta(seconds=40)) == 2
    cycle.update(run(created, "scheduled", 50))  # the same run again, changed
    assert cycle.occupying("t", NOW, NOW + timedelta(seconds=40)) == 1
    assert cycle.occupying("t", NOW, NOW + timedelta(seconds=50)) == 2
    # The committed counts are untouched by the cycle.
    assert runs.occupying("t", NOW, NOW) == 1 and len(runs) == 2


def test_occupancy_agrees_with_counting_every_run_afresh() -> None:
    rng = random.Random(33)
    runs = InFlightRuns(WINDOW)
    entries: dict[UUID, InFlight] = {}
    for _ in range(2000):
        if entries and rng.random() < 0.3:
            run_id = rng.choice(list(entries))
            runs.discard(run_id)
            del entries[run_id]
            continue
        run_id = rng.choice(list(entries)) if entries and rng.random() < 0.2 else uuid4()
        entry = due(rng.choice("ab"), None if rng.random() < 0.2 else rng.uniform(-60, 120))
        runs.put(run_id, entry)
        entries[run_id] = entry
    window = WINDOW.total_seconds()
    edge = NOW.timestamp() + window
    for _ in range(200):
        tenant = rng.choice("ab")
        at = NOW + timedelta(seconds=rng.uniform(-10, 130))
        moment = max(at, NOW).timestamp()
        expected = sum(1 for e in entries.values() if e.tenant == tenant and (
            e.due is None or e.due <= edge or moment - window < e.due <= moment + window))
        assert runs.occupying(tenant, NOW, at) == expected
