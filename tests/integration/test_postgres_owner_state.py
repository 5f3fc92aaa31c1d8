"""PostgresOwnerState against a real PostgreSQL: epochs fence writes (invariant 2), applied
offsets make applying idempotent, and one fire time has one run (invariant 4)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from uuid import uuid4

import pytest

from cronlog.commands.owner.ports import DueWindow, PartitionEvents, Produced
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.config import Settings
from cronlog.infra.postgres.connection import StateStoreError
from cronlog.infra.postgres.owner_state import PostgresOwnerState, StaleEpoch
from cronlog.projections.state import LoggedEvent
from tests.support.logged_events import a_job, logged

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


def partition_events(partition: int, epoch: int, job_events: Sequence[LoggedEvent],
                     run_events: Sequence[LoggedEvent]) -> PartitionEvents:
    """PartitionEvents of logged events: it is typed for the messages an owner produced, of
    which PostgresOwnerState reads only what every LoggedEvent has."""
    return PartitionEvents(partition, epoch, cast(Sequence[Produced], job_events),
                           cast(Sequence[Produced], run_events))


def test_epoch_fences_an_old_owner(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    old = state.take_epoch(0, "old")
    new = state.take_epoch(0, "new")
    assert new.epoch == old.epoch + 1
    job = a_job()
    jobs, runs = logged(list(job.collect_events()))
    with pytest.raises(StaleEpoch):
        state.apply(0, old.epoch, jobs, runs)
    assert state.job(job.id) is None, "a stale owner wrote nothing"
    state.apply(0, new.epoch, jobs, runs)
    row = state.job(job.id)
    assert row is not None and row.version == 1


def test_applied_offsets_advance_with_the_state(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(1, "o")
    job = a_job()
    run = job.fire(T0)
    jobs, runs = logged([*job.collect_events(), *run.collect_events()], first_offset=7)
    state.apply(1, claim.epoch, jobs, runs)
    again = state.take_epoch(1, "o2")
    assert again.job_events_offset == max(e.offset for e in jobs) + 1
    assert again.run_events_offset == max(e.offset for e in runs) + 1
    due = state.due_jobs([1], DueWindow.plain(T0 + timedelta(hours=1)), 10)
    assert [r.job_id for r in due] == [job.id]
    assert state.due_jobs([2], DueWindow.plain(T0 + timedelta(hours=1)), 10) == []
    taken = state.request(job.id, str(jobs[0].record["request_id"]))
    assert taken is not None and taken.job_version == 1 and taken.digest is None


def test_a_second_run_for_the_same_fire_time_stops_the_projection(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(2, "o")
    job = a_job()
    first = job.fire(T0)
    jobs, runs = logged([*job.collect_events(), *first.collect_events()])
    state.apply(2, claim.epoch, jobs, runs)
    # A run for the same fire time under another id: a double fire.
    from cronlog.domain.run import Run

    twin = Run.schedule(job, first.scheduled_at, trigger="schedule", at=T0, run_id=uuid4())
    _, twin_runs = logged(list(twin.collect_events()), first_offset=100)
    with pytest.raises(StateStoreError, match="one_scheduled_run_per_fire_time"):
        state.apply(2, claim.epoch, [], twin_runs)


def test_the_due_index_offers_far_apart_jobs_within_the_sparse_horizon(
        isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    claim = state.take_epoch(3, "o")

    def job(**schedule: Any) -> Job:
        return Job.create(uuid4(), JobSpec(name="n", tenant="t", queue="q", handler="echo",
                                           **schedule), "req-" + uuid4().hex, T0)

    once = job(at=T0 + timedelta(seconds=40))  # never fired
    every_second = job(cron="* * * * * *")
    run = every_second.fire(T0)  # last interval 1 s: due only within the horizon
    hourly = job(cron="0 * * * *")
    hourly.fire(T0)
    hourly.fire(T0)  # its last interval an hour
    jobs, runs = logged([*once.collect_events(), *every_second.collect_events(),
                         *run.collect_events(), *hourly.collect_events()])
    state.apply(3, claim.epoch, jobs, runs)

    def due(now: datetime) -> set[object]:
        return {r.job_id for r in state.due_jobs([3], DueWindow(
            now + timedelta(seconds=2), now + timedelta(seconds=60), timedelta(seconds=60)), 10)}

    assert every_second.next_fire_at == T0 + timedelta(seconds=2)
    assert due(T0 - timedelta(seconds=10)) == {once.id}
    assert due(T0) == {once.id, every_second.id}
    assert hourly.next_fire_at is not None
    assert due(hourly.next_fire_at - timedelta(seconds=61)) == {once.id, every_second.id}
    assert due(hourly.next_fire_at - timedelta(seconds=30)) == {
        once.id, every_second.id, hourly.id}
    # Without a sparse horizon, only the horizon counts.
    assert {r.job_id for r in state.due_jobs([3], DueWindow.plain(T0 + timedelta(seconds=2)), 10)} == {
        every_second.id}


def test_caught_up_is_recorded_only_at_the_epoch_it_was_caught_up_at(isolated: Settings) -> None:
    from cronlog.infra.postgres.partition_owners import PostgresPartitionOwners

    state = PostgresOwnerState(isolated.postgres_dsn)
    records = PostgresPartitionOwners(isolated.postgres_dsn)
    first = state.take_epochs([0, 1], "a")
    assert [c.previous_owner for c in first] == [None, None], "nobody held them before"
    assert records.owner_records()[0].caught_up_member is None, "taken, not caught up"
    # Partition 1 changes hands before the first owner reports its catch-up.
    assert [c.previous_owner for c in state.take_epochs([1], "b")] == ["a"], \
        "a takeover learns whom to fence"
    state.caught_up({c.partition: c.epoch for c in first}, "member-a")
    now = records.owner_records()
    assert (now[0].owner, now[0].caught_up_member) == ("a", "member-a")
    assert (now[1].owner, now[1].caught_up_member) == ("b", None), "the newer claim stands"
    state.take_epochs([0], "c")
    assert records.owner_records()[0].caught_up_member is None, "a new epoch starts over"
    records.close()


def test_a_cycle_of_several_partitions_applies_all_or_none(isolated: Settings) -> None:
    state = PostgresOwnerState(isolated.postgres_dsn)
    first, second = state.take_epoch(0, "o"), state.take_epoch(3, "o")
    one, other = a_job(), a_job()
    one_jobs, one_runs = logged([*one.collect_events(), *one.fire(T0).collect_events()], 4)
    other_jobs, other_runs = logged(list(other.collect_events()), 9)
    # Partition 3 moved to another owner meanwhile: nothing of the cycle is written, not
    # even partition 0's, whose epoch is still this owner's.
    moved = state.take_epoch(3, "next")
    with pytest.raises(StaleEpoch, match=r"\[3\]"):
        state.apply_all([partition_events(0, first.epoch, one_jobs, one_runs),
                         partition_events(3, second.epoch, other_jobs, other_runs)])
    assert state.job(one.id) is None and state.job(other.id) is None
    state.apply_all([partition_events(0, first.epoch, one_jobs, one_runs),
                     partition_events(3, moved.epoch, other_jobs, other_runs)])
    assert state.job(one.id) is not None and state.job(other.id) is not None
    assert len(state.in_flight_runs([0])) == 1
    again_0, again_3 = state.take_epoch(0, "o2"), state.take_epoch(3, "o2")
    assert (again_0.job_events_offset, again_0.run_events_offset) == (
        max(e.offset for e in one_jobs) + 1, max(e.offset for e in one_runs) + 1)
    assert (again_3.job_events_offset, again_3.run_events_offset) == (
        max(e.offset for e in other_jobs) + 1, 0)
