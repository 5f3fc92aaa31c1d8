"""A calendar's update by reference (issue 33, item 2; commands/owner/calendar_followers.py),
without servers: the pending marks on their own; then the owner, whose followers apply the
calendars projection's row lazily (a bounded chunk a cycle, at least one when the budget is
spent), stay pending while the row is older than the version named, apply a due job before
it fires, and find what they missed again after a takeover."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.commands.owner.calendar_followers import (
    SWEEP_SECONDS,
    CalendarFollowers,
    Pending,
    PendingCalendars,
    applies_to,
    ready,
)
from cronlog.commands.owner.owner_cycle import Cycle, RunCache
from cronlog.commands.owner.set_aside import JobFailed, JobsSetAside
from cronlog.domain.calendar import Calendar
from cronlog.domain.exclusions import AppliedCalendar, DateRange, Exclusions, calendar_id
from cronlog.domain.job import Job
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import DAILY, JAN_2, days, inbound
from tests.support.owner_world import CalendarWorld

CID = calendar_id("t", "holidays")
JOB_A, JOB_B, JOB_C = uuid4(), uuid4(), uuid4()


# -- the marks ---------------------------------------------------------------------------
def test_a_job_is_marked_once_with_the_newest_version_it_was_told_of() -> None:
    pending = PendingCalendars()
    pending.mark(JOB_A, CID, 3)
    pending.mark(JOB_A, CID, 2)
    pending.mark(JOB_B, CID, 3)
    assert len(pending) == 2 and pending.get(JOB_A) == Pending(JOB_A, CID, 3)
    pending.mark(JOB_A, CID, 4)
    # A newer mark goes to the back, behind the older marks of other jobs.
    assert pending.first(5) == [Pending(JOB_B, CID, 3), Pending(JOB_A, CID, 4)]
    assert pending.first(1) == [Pending(JOB_B, CID, 3)]


def test_done_forgets_a_mark_unless_a_newer_one_came_since() -> None:
    pending = PendingCalendars()
    pending.mark(JOB_A, CID, 3)
    seen = pending.first(1)[0]
    pending.mark(JOB_A, CID, 4)
    pending.done(seen)
    assert pending.get(JOB_A) == Pending(JOB_A, CID, 4)
    pending.done(pending.first(1)[0])
    assert JOB_A not in pending and not pending


def test_a_mark_looked_at_too_early_goes_to_the_back() -> None:
    pending = PendingCalendars()
    for job in (JOB_A, JOB_B, JOB_C):
        pending.mark(job, CID, 2)
    pending.to_back(pending.first(1)[0])
    assert [p.job_id for p in pending.first(3)] == [JOB_B, JOB_C, JOB_A]


def test_a_row_is_ready_at_the_version_named_or_a_newer_one() -> None:
    entry = Pending(JOB_A, CID, 3)
    assert not ready(entry, None)
    assert not ready(entry, AppliedCalendar("holidays", 2))
    assert ready(entry, AppliedCalendar("holidays", 3))
    assert ready(entry, AppliedCalendar("holidays", 4))


def test_only_a_job_still_naming_the_calendar_applies_it() -> None:
    job = Job.create(JOB_A, DAILY, "r1", T0)
    entry = Pending(JOB_A, CID, 2)
    assert applies_to(job, entry)
    assert not applies_to(None, entry)
    assert not applies_to(job, Pending(JOB_A, calendar_id("other", "holidays"), 2))
    moved = Job.create(JOB_A, replace(DAILY, calendar="other"), "r1", T0)
    assert not applies_to(moved, entry)
    job.delete("r2", T0)
    assert not applies_to(job, entry)


# -- a chunk a cycle, on its own -----------------------------------------------------------
class RowsStore:
    """What the followers read: calendar rows and the owned jobs."""

    def __init__(self, jobs: list[Job], row: AppliedCalendar) -> None:
        self.jobs = {j.id: j for j in jobs}
        self.row = row
        self.row_reads = 0
        self.loads: list[int] = []

    def published_calendar(self, cid: UUID) -> AppliedCalendar | None:
        self.row_reads += 1
        return self.row if cid == CID else None

    def calendar_versions(self, calendar_ids: list[UUID]) -> dict[UUID, int]:
        return {CID: self.row.version} if CID in calendar_ids else {}

    def following_jobs(self, job_ids: list[UUID], partitions: list[int]) -> list[Job]:
        self.loads.append(len(job_ids))
        return [self.jobs[j] for j in job_ids if j in self.jobs]

    def stale_followers(self, partitions: list[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        return []


def followers_of(count: int, per_cycle: int) -> tuple[CalendarFollowers, RowsStore,
                                                      list[Job]]:
    jobs = [Job.create(uuid4(), DAILY, f"r{n}", T0,
                       calendar=AppliedCalendar("holidays", 1)) for n in range(count)]
    for job in jobs:
        job.collect_events()
    row = AppliedCalendar("holidays", 2, True,
                          Exclusions((DateRange(date(2026, 1, 2), date(2026, 1, 2)),)))
    store = RowsStore(jobs, row)
    followers = CalendarFollowers(store, JobsSetAside(), lambda: 0.0,  # type: ignore[arg-type]
                                  per_cycle=per_cycle)
    for job in jobs:
        followers.published({"job_id": str(job.id), "calendar_id": str(CID), "version": 2})
    return followers, store, jobs


def a_cycle(followers: CalendarFollowers, store: Any,
            spent: bool = False) -> Cycle:
    cycle = Cycle(store, RunCache(), dispatch_until=T0)
    followers.begin(cycle, T0)
    followers.apply_pending([0], lambda: spent)
    followers.committed()
    return cycle


def test_a_cycle_applies_at_most_its_chunk_reading_the_calendar_once() -> None:
    followers, store, jobs = followers_of(7, per_cycle=3)
    applied: list[UUID] = []
    for expected in (3, 3, 1):
        cycle = a_cycle(followers, store)
        assert len(cycle.jobs) == expected
        applied.extend(cycle.jobs)
        assert store.row_reads == 1, "one read of the calendar a cycle"
        store.row_reads = 0
    assert sorted(applied) == sorted(j.id for j in jobs) and not followers.pending
    assert all(j.calendar is not None and j.calendar.version == 2
               and j.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC) for j in jobs)


def test_a_cycle_out_of_budget_applies_one_job() -> None:
    followers, store, _ = followers_of(5, per_cycle=200)
    cycle = a_cycle(followers, store, spent=True)
    assert len(cycle.jobs) == 1 and len(followers.pending) == 4
    assert store.loads == [5], "one chunk loaded"


def test_a_round_that_is_not_committed_leaves_its_jobs_pending() -> None:
    followers, store, _ = followers_of(2, per_cycle=200)
    cycle = Cycle(store, RunCache(), dispatch_until=T0)  # type: ignore[arg-type]
    followers.begin(cycle, T0)
    followers.apply_pending([0], lambda: False)
    followers.begin(Cycle(store, RunCache(), dispatch_until=T0), T0)  # type: ignore[arg-type]
    followers.committed()
    assert len(followers.pending) == 2


def test_a_job_no_longer_owned_is_dropped_for_its_new_owner_to_find() -> None:
    followers, store, jobs = followers_of(2, per_cycle=200)
    del store.jobs[jobs[0].id]
    cycle = a_cycle(followers, store)
    assert list(cycle.jobs) == [jobs[1].id] and not followers.pending


# -- the owner -------------------------------------------------------------------------------
def by_reference(job_id: UUID, version: int) -> dict[str, Any]:
    return {"job_id": str(job_id), "calendar_id": str(CID), "tenant": "t",
            "name": "holidays", "version": version, "found": True, "exclusions": [],
            "at": T0, "by_reference": True}


def test_an_update_is_published_by_reference_and_applied_from_the_row() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    out = world.calendar("UpdateCalendar", "u1", exclusions=JAN_2)
    published = [o for o in out if o.name == "CalendarPublished"]
    assert [(p.record["version"], p.record["by_reference"], p.record["exclusions"])
            for p in published] == [(2, True, [])]
    job = world.store.jobs[job_id]
    assert job.calendar is not None and job.calendar.version == 2
    assert job.calendar.exclusions == Exclusions((DateRange(date(2026, 1, 2),
                                                            date(2026, 1, 2)),))
    assert job.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)
    applied = [o for o in world.written() if o.name == "JobCalendarApplied"
               and o.record["calendar_version"] == 2]
    # The job's event keeps the version and the days, for replay and audit.
    assert len(applied) == 1 and applied[0].record["exclusions"] == JAN_2


def set_row(world: CalendarWorld, version: int, exclusions: list[dict[str, Any]]) -> None:
    """The calendars projection at a version, as if its owner had applied an update."""
    held = world.store.calendars[CID]
    world.store.calendars[CID] = Calendar.restore(
        CID, version, T0, T0, tenant="t", name="holidays", description="d",
        exclusions=Exclusions(tuple(DateRange(x["first"], x["last"]) for x in exclusions)),
        subscribers=held.subscribers)


def test_a_job_whose_calendar_row_is_older_stays_pending_until_the_row_comes() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    world.offset += 1
    world.send(inbound("CalendarPublished", by_reference(job_id, 2), world.offset))
    assert world.store.jobs[job_id].calendar.version == 1  # type: ignore[union-attr]
    assert world.owner.pending_followers == 1
    set_row(world, 2, JAN_2)
    world.settle()
    assert world.owner.pending_followers == 0
    job = world.store.jobs[job_id]
    assert job.calendar is not None and job.calendar.version == 2
    assert job.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)


def test_a_pending_job_that_comes_due_is_applied_before_it_fires() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    every_second = replace(DAILY, cron="* * * * * *", time_zone="UTC")
    job_id = world.create_job(every_second, "j1", version=1)
    today = days((T0.date(), T0.date()))
    set_row(world, 2, today)
    # Marked and due in one cycle: the due read applies it before the job fires.
    world.offset += 1
    world.transport.inbox.append(inbound("CalendarPublished", by_reference(job_id, 2),
                                         world.offset))
    sent = len(world.transport.transactions)
    world.at(5)
    written = [o for t in world.transport.transactions[sent:] for o in t]
    assert [o.record["calendar_version"] for o in written
            if o.name == "JobCalendarApplied"] == [2]
    assert not [o for o in written if o.name == "RunScheduled"
                and o.record["scheduled_at"].date() == T0.date()]
    assert world.store.jobs[job_id].next_fire_at == datetime(2026, 1, 2, tzinfo=UTC)


def test_a_due_job_behind_its_calendars_row_is_applied_before_it_fires_marked_or_not() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    every_second = replace(DAILY, cron="* * * * * *", time_zone="UTC")
    job_id = world.create_job(every_second, "j1", version=1)
    # No publication reached this owner (nor is the job marked): the row says 2, today off.
    set_row(world, 2, days((T0.date(), T0.date())))
    sent = len(world.transport.transactions)
    world.at(5)
    written = [o for t in world.transport.transactions[sent:] for o in t]
    assert [o.record["calendar_version"] for o in written
            if o.name == "JobCalendarApplied"] == [2]
    assert not [o for o in written if o.name == "RunScheduled"
                and o.record["scheduled_at"].date() == T0.date()]
    assert world.owner.pending_followers == 0
    assert world.store.jobs[job_id].next_fire_at == datetime(2026, 1, 2, tzinfo=UTC)


def test_a_new_owner_finds_the_jobs_behind_their_calendar_after_its_catch_up() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    # The publication was read and committed, then the owner went: the row says 2.
    set_row(world, 2, JAN_2)
    world.owner.assigned([0])
    world.settle()
    job = world.store.jobs[job_id]
    assert job.calendar is not None and job.calendar.version == 2
    assert job.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)


def test_a_calendar_row_that_does_not_read_drops_its_marks_and_the_cycle_goes_on() -> None:
    followers, store, jobs = followers_of(2, per_cycle=200)

    def unreadable(cid: UUID) -> AppliedCalendar | None:
        raise ValueError("calendars.exclusions: 'x' is not a date")

    store.published_calendar = unreadable  # type: ignore[method-assign]
    cycle = a_cycle(followers, store)
    assert not cycle.jobs and not followers.pending
    assert all(j.calendar is not None and j.calendar.version == 1 for j in jobs)


def test_a_job_whose_row_does_not_load_fails_alone() -> None:
    followers, store, jobs = followers_of(3, per_cycle=200)
    bad = jobs[1].id
    loads = store.following_jobs

    def following_jobs(job_ids: list[UUID], partitions: list[int]) -> list[Job]:
        if bad in job_ids:
            raise ValueError("spec does not decode")
        return loads(job_ids, partitions)

    store.following_jobs = following_jobs  # type: ignore[method-assign]
    cycle = Cycle(store, RunCache(), dispatch_until=T0)  # type: ignore[arg-type]
    followers.begin(cycle, T0)
    with pytest.raises(JobFailed) as failed:
        followers.apply_pending([0], lambda: False)
    assert failed.value.job_id == bad


def test_a_publication_read_before_its_row_by_an_owner_that_left_is_found_by_the_sweep() -> None:
    world = CalendarWorld()
    world.calendar("CreateCalendar", "c1")
    job_id = world.create_job(DAILY, "j1", version=1)
    world.offset += 1
    world.send(inbound("CalendarPublished", by_reference(job_id, 2), world.offset))
    # The owner that read it goes before the row is written; the next one finds nothing
    # behind the row when it takes over.
    monotonic = FakeClock()
    world.owner = make_owner(world.store, world.transport, world.clock, monotonic=monotonic)
    world.settle()
    assert world.owner.pending_followers == 0
    set_row(world, 2, JAN_2)
    world.settle()
    assert world.store.jobs[job_id].calendar.version == 1  # type: ignore[union-attr]
    # Its sweep, SWEEP_SECONDS later, reads the followers of calendars applied recently.
    monotonic.seconds = SWEEP_SECONDS
    world.settle()
    job = world.store.jobs[job_id]
    assert job.calendar is not None and job.calendar.version == 2
    assert job.next_fire_at == datetime(2026, 1, 3, 9, tzinfo=UTC)
