"""A calendar's followers, applied lazily and in bounded chunks (issue 33, item 2;
docs/calendars.md, "How a calendar update reaches its jobs").

An UpdateCalendar reaches each following job by reference: a CalendarPublished naming the
calendar and its version only. The job's owner does not search on receipt; it marks the job
pending (PendingCalendars) and, each cycle, after the due jobs were fired and within what is
left of the cycle's budget, applies the calendar to at most PER_CYCLE pending jobs, reading
each calendar once per cycle from the `calendars` projection (written by the calendar's
owner, under its epoch, right after its commit). A due job behind its calendar's row,
marked or not, is applied first, then fired (FollowersFirst, the store Firing reads its due
jobs through; the versions of the due jobs' calendars are read once a cycle), so what a job
fires by never rests on the marks: they only bring the application forward.

Pending is derived again, never trusted to memory alone: a new owner, after its catch-up,
reads the jobs of its partitions whose applied version is older than their calendar's row
(one query per takeover), and every SWEEP_SECONDS it reads those of calendars applied within
SWEEP_WINDOW (one query), which finds a job whose publication came before its calendar's
row and whose owner changed meanwhile. A crash loses nothing: what a job applied is in its
events (JobCalendarApplied keeps the version and the days), what it has not is in the rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands.owner.owner_cycle import Cycle
from cronlog.commands.owner.ports import Claim, DueWindow, OwnerStore, PartitionEvents, StoredRequest
from cronlog.commands.owner.set_aside import OUTSIDE_FAILURES, JobsSetAside, blaming
from cronlog.domain.calendar import Calendar
from cronlog.domain.channel import Channel
from cronlog.domain.exclusions import AppliedCalendar, calendar_id
from cronlog.domain.fan_in import FanIn
from cronlog.domain.job import Job
from cronlog.domain.job_status import DELETED
from cronlog.domain.run import Run
from cronlog.ports import Record

log = logging.getLogger(__name__)

# Pending jobs a cycle looks at, at most: each is at most one bounded next-fire search
# (ScheduleTooCostly's bound, about 1 ms) and one JobCalendarApplied of at most 1,000
# ranges (about 6 KB) in the cycle's transaction and Postgres apply, so a cycle adds at
# most about 0.05 s of deciding and 0.3 MB whatever a tenant's calendar has, and less once
# its share of the budget is spent (FOLLOWERS_SHARE, commands/owner/cycle_budget.py). The commit
# and the apply grow with the events too (200 jobs on a 301-day calendar took 0.5 s and
# 0.7 s of a loaded 2-core machine; 100 made cycles of 0.45 s, which another tenant's
# command waited for), hence 50.
PER_CYCLE = 50
# Jobs loaded from the state per query: a cycle whose budget runs out early loads no more
# than it can apply.
LOAD_CHUNK = 25
# How often an owner reads the followers of calendars applied recently, and how far back:
# the window is several sweeps long, so every calendar row applied while the owner holds
# its partitions is read by at least one sweep.
SWEEP_SECONDS = 30.0
SWEEP_WINDOW = timedelta(minutes=2)


@dataclass(frozen=True, slots=True)
class Pending:
    """A job told that its calendar has a newer version than it applied."""

    job_id: UUID
    calendar_id: UUID
    version: int


class PendingCalendars:
    """Jobs waiting to apply their calendar's newer version, oldest mark first. A job is
    marked once, with the newest version it was told of; looking at it again without
    applying (its calendar's row is older still) moves it to the back, so such jobs never
    hold back the others. Memory: one entry per following job of the owned partitions (a
    job follows one calendar), bounded by the jobs themselves."""

    def __init__(self) -> None:
        self._pending: dict[UUID, Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._pending

    def get(self, job_id: UUID) -> Pending | None:
        return self._pending.get(job_id)

    def mark(self, job_id: UUID, calendar: UUID, version: int) -> None:
        held = self._pending.get(job_id)
        if held is not None and held.calendar_id == calendar and held.version >= version:
            return
        self._pending.pop(job_id, None)
        self._pending[job_id] = Pending(job_id, calendar, version)

    def first(self, count: int) -> list[Pending]:
        """The `count` oldest marks (they stay marked until done)."""
        found: list[Pending] = []
        for entry in self._pending.values():
            if len(found) >= count:
                break
            found.append(entry)
        return found

    def to_back(self, entry: Pending) -> None:
        if self._pending.get(entry.job_id) == entry:
            del self._pending[entry.job_id]
            self._pending[entry.job_id] = entry

    def done(self, entry: Pending) -> None:
        """The mark was applied (or is moot): dropped, unless a newer one came since."""
        held = self._pending.get(entry.job_id)
        if held is not None and (held.calendar_id, held.version) == (entry.calendar_id,
                                                                     entry.version):
            del self._pending[entry.job_id]

    def clear(self) -> None:
        self._pending.clear()


def ready(entry: Pending, row: AppliedCalendar | None) -> bool:
    """Whether the calendar's row has the version the job was told of (or a newer one):
    the calendar's owner applies it right after its commit, so a publication may come
    first."""
    return row is not None and row.version >= entry.version


def applies_to(job: Job | None, entry: Pending) -> bool:
    """Whether the job still follows the calendar it was told of: not deleted and naming
    it (a job that left it is told no more; its unsubscription is on its way)."""
    return (job is not None and job.status != DELETED and job.spec.calendar is not None
            and calendar_id(job.spec.tenant, job.spec.calendar) == entry.calendar_id)


@dataclass
class _CycleWork:
    """What one round of deciding did with the pending jobs: settled (forgotten) once the
    cycle commits, dropped with the round otherwise."""

    cycle: Cycle
    now: datetime
    rows: dict[UUID, AppliedCalendar | None] = field(default_factory=dict)
    # The calendars' versions as their rows say, for the due jobs that follow one.
    versions: dict[UUID, int] = field(default_factory=dict)
    settled: list[Pending] = field(default_factory=list)
    applied: int = 0


class CalendarFollowers:
    def __init__(self, store: OwnerStore, set_aside: JobsSetAside,
                 monotonic: Callable[[], float], per_cycle: int = PER_CYCLE) -> None:
        self._store = store
        self._set_aside = set_aside
        self._monotonic = monotonic
        self._per_cycle = per_cycle
        self.pending = PendingCalendars()
        self._work: _CycleWork | None = None
        self._swept_at: float | None = None

    # -- marking ---------------------------------------------------------------------------
    def published(self, record: Record) -> None:
        """A CalendarPublished by reference: the job is marked, nothing is read or searched."""
        self.pending.mark(UUID(str(record["job_id"])), UUID(str(record["calendar_id"])),
                          int(record["version"]))

    def adopt(self, partitions: Sequence[int]) -> None:
        """Partitions just caught up: their jobs behind their calendar's row are pending."""
        if partitions:
            self._mark(self._store.stale_followers(partitions))
            self._swept_at = self._monotonic()

    def _mark(self, found: Iterable[tuple[UUID, UUID, int]]) -> None:
        for job_id, calendar, version in found:
            self.pending.mark(job_id, calendar, version)

    def sweep(self, owned: Sequence[int]) -> None:
        """Every SWEEP_SECONDS: marks the jobs of owned partitions behind a calendar applied
        within SWEEP_WINDOW (a publication read before its row, then the owner changed)."""
        at = self._monotonic()
        if (self._swept_at is not None and at - self._swept_at < SWEEP_SECONDS) or not owned:
            return
        self._swept_at = at
        self._mark(self._store.stale_followers(owned, SWEEP_WINDOW))

    # -- a cycle -----------------------------------------------------------------------------
    def begin(self, cycle: Cycle, now: datetime) -> None:
        """A round of deciding starts (a dropped round's work is forgotten with it)."""
        self._work = _CycleWork(cycle, now)

    def committed(self) -> None:
        """The round's cycle committed (or had nothing to commit): its marks are settled."""
        if self._work is not None:
            for entry in self._work.settled:
                self.pending.done(entry)
        self._work = None

    def _row(self, work: _CycleWork, calendar: UUID) -> AppliedCalendar | None:
        if calendar not in work.rows:
            try:
                work.rows[calendar] = self._store.published_calendar(calendar)
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                # A row that does not read fails only its followers' marks (invariant 9):
                # they are dropped, and found again once the row is written anew.
                log.warning("calendar %s: its row does not read (%s); its followers keep "
                            "the version they hold", calendar, exc)
                work.rows[calendar] = None
        return work.rows[calendar]

    def _load(self, ids: list[UUID], owned: Sequence[int]) -> dict[UUID, Job]:
        """The jobs, of owned partitions, in one read; one by one if a row does not load,
        so that the job whose row it is is set aside alone (JobFailed)."""
        try:
            return {job.id: job for job in self._store.following_jobs(ids, owned)}
        except OUTSIDE_FAILURES:
            raise
        except Exception:
            loaded: dict[UUID, Job] = {}
            for job_id in ids:
                with blaming(job_id, None):
                    loaded.update((j.id, j) for j in self._store.following_jobs([job_id], owned))
            return loaded

    def _apply(self, work: _CycleWork, job: Job, entry: Pending) -> None:
        """Applies the calendar's row to the job (the cycle's own copy of it); a job whose
        row is older than the version it was told of stays pending."""
        row = self._row(work, entry.calendar_id)
        if row is None or not applies_to(job, entry):
            work.settled.append(entry)  # nothing to apply: no such calendar, or left it
            return
        if not ready(entry, row):
            return
        with blaming(job.id, job.spec.tenant):
            # Only if newer than what the job holds (a subscription's answer or an update
            # may have brought it already).
            if job.apply_calendar(row, None, work.now):
                work.applied += 1
        work.settled.append(entry)

    def apply_pending(self, owned: Sequence[int], spent: Callable[[], bool]) -> None:
        """Applies the calendar to at most PER_CYCLE pending jobs while the cycle's budget
        lasts (at least one a cycle, so pending jobs always move on). A job whose calendar's
        row is older than its mark is moved to the back without being loaded."""
        work = self._work
        if work is None:
            return
        self.sweep(owned)
        candidates: list[Pending] = []
        for entry in self.pending.first(self._per_cycle):
            row = self._row(work, entry.calendar_id)
            if entry.job_id in self._set_aside or row is None:
                # Set aside, or no such calendar: a takeover derives it again if need be.
                work.settled.append(entry)
            elif ready(entry, row):
                candidates.append(entry)
            else:
                self.pending.to_back(entry)
        looked = 0
        for start in range(0, len(candidates), LOAD_CHUNK):
            if looked and spent():
                return
            chunk = candidates[start:start + LOAD_CHUNK]
            loaded = self._load([e.job_id for e in chunk if e.job_id not in work.cycle.jobs],
                                owned)
            for entry in chunk:
                if looked and spent():
                    return
                looked += 1
                job = work.cycle.jobs.get(entry.job_id) or loaded.get(entry.job_id)
                if job is None:
                    # Not of an owned partition any more, or gone: its owner derives it.
                    work.settled.append(entry)
                    continue
                work.cycle.jobs[job.id] = job
                self._apply(work, job, entry)

    def _versions(self, work: _CycleWork, calendars: set[UUID]) -> dict[UUID, int]:
        wanted = sorted(calendars - set(work.versions))
        if wanted:
            found = self._store.calendar_versions(wanted)
            work.versions.update({c: found.get(c, 0) for c in wanted})
        return work.versions

    def due(self, jobs: list[Job], spent: Callable[[], bool]) -> list[Job]:
        """Due jobs about to fire: one that follows a calendar whose row is newer than the
        version it holds, marked pending or not, is applied first, on the cycle's copy of it
        (the one Firing takes), so what a job fires by never rests on a mark in memory. The
        rows' versions are read once a cycle for all of them (one query); a row's days only
        for a job behind it. One the budget has no room for is not fired in this cycle; the
        next cycle applies it first (due jobs come first in its due read)."""
        work = self._work
        if work is None:
            return jobs
        following = {job.id: calendar_id(job.spec.tenant, job.spec.calendar) for job in jobs
                     if job.spec.calendar is not None and job.calendar is not None
                     and job.calendar.found and job.id not in self._set_aside}
        if not following:
            return jobs
        versions = self._versions(work, set(following.values()))
        firing: list[Job] = []
        for due in jobs:
            cid = following.get(due.id)
            job = work.cycle.jobs.get(due.id, due)
            entry = self.pending.get(due.id)
            held = job.calendar.version if job.calendar is not None else 0
            if cid is None or (entry is None and versions.get(cid, 0) <= held):
                firing.append(due)
                continue
            if work.applied and spent():
                continue
            job = work.cycle.jobs.setdefault(due.id, due)
            self._apply(work, job, entry or Pending(job.id, cid, versions[cid]))
            firing.append(job)
        return firing


class FollowersFirst:
    """The owner's store as Firing reads it: due jobs come with their calendar's newer
    version applied (CalendarFollowers.due); every other read goes to the store as it is."""

    def __init__(self, store: OwnerStore, followers: CalendarFollowers,
                 spent: Callable[[], bool]) -> None:
        self._store = store
        self._followers = followers
        self._spent = spent

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[Job]:
        return self._followers.due(
            self._store.due_jobs(partitions, window, limit, excluded_tenants), self._spent)

    # -- the rest as the store has it ----------------------------------------------------
    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]:
        return self._store.take_epochs(partitions, owner)

    def job(self, job_id: UUID) -> Job | None:
        return self._store.job(job_id)

    def run(self, run_id: UUID) -> Run | None:
        return self._store.run(run_id)

    def load_runs(self, run_ids: Sequence[UUID]) -> list[Run]:
        return self._store.load_runs(run_ids)

    def load_jobs(self, job_ids: Sequence[UUID]) -> list[Job]:
        return self._store.load_jobs(job_ids)

    def in_flight_runs(self, partitions: Sequence[int]) -> list[tuple[int, Run]]:
        return self._store.in_flight_runs(partitions)

    def caught_up(self, claims: Sequence[Claim], group_member: str) -> None:
        self._store.caught_up(claims, group_member)

    def unfinished_runs(self, job_id: UUID) -> list[Run]:
        return self._store.unfinished_runs(job_id)

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        return self._store.request(job_id, request_id)

    def requests(self, keys: Sequence[tuple[UUID, str]]
                 ) -> dict[tuple[UUID, str], StoredRequest]:
        return self._store.requests(keys)

    def apply(self, batches: Sequence[PartitionEvents]) -> None:
        self._store.apply(batches)

    def fan_in(self, job: Job) -> FanIn:
        return self._store.fan_in(job)

    def waiting_fan_ins(self, partitions: Sequence[int]) -> list[tuple[int, UUID, datetime]]:
        return self._store.waiting_fan_ins(partitions)

    def jobs_with_dependents(self, partitions: Sequence[int]) -> list[tuple[int, UUID]]:
        return self._store.jobs_with_dependents(partitions)

    def calendar(self, calendar_id: UUID) -> Calendar | None:
        return self._store.calendar(calendar_id)

    def channel(self, channel_id: UUID) -> Channel | None:
        return self._store.channel(channel_id)

    def published_calendar(self, calendar_id: UUID) -> AppliedCalendar | None:
        return self._store.published_calendar(calendar_id)

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        return self._store.calendar_versions(calendar_ids)

    def following_jobs(self, job_ids: Sequence[UUID], partitions: Sequence[int]) -> list[Job]:
        return self._store.following_jobs(job_ids, partitions)

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        return self._store.stale_followers(partitions, within)
