"""The Job aggregate: a spec, a status and the next time it is due.

Its part in dependencies is its base class (domain/job_dependencies.py), as are its
calendar (domain/job_calendar.py) and its restore (domain/job_restore.py); its fire times
outside the regular advance are in domain/fire_times.py, the overlap policy in
domain/overlap.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.catalogue import JobEvent
from cronlog.domain.errors import DependentsRemain, InvalidSpec, JobNotActive, StaleVersion
from cronlog.domain.exclusions import (
    AppliedCalendar,
    excluded_by,
    named_calendar,
    newest,
)
from cronlog.domain.fire_times import (
    MAX_BACKFILL,
    backfill_fire_times,
    first_fire_time,
    searched,
)
from cronlog.domain.ids import backfill_run_id, manual_run_id
from cronlog.domain.job_calendar import CalendarFollower
from cronlog.domain.job_dependencies import JobDependencies
from cronlog.domain.job_restore import JobRestore
from cronlog.domain.job_status import ACTIVE, COMPLETED, DELETED, PAUSED
from cronlog.domain.missed_fire_times import last_fire_time_before, overdue_range
from cronlog.domain.overlap import run_under_policy
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy
from cronlog.domain.run import Chain, Run
from cronlog.domain.schedule import FireTime, Schedule
from cronlog.domain.spec import JobSpec, validate_spec

# JobCreated is a job's first event, so every job starts at this revision.
FIRST_REVISION = 1


# What recording an overdue stretch left to do (Job._miss_overdue).
_RECORDED = "recorded"
_RUN_LATEST = "run latest"
_CUT_SHORT = "cut short"


def _status_for(spec: JobSpec, next_fire_at: FireTime | None) -> str:
    # A dependent job has no fire times of its own and never completes.
    return ACTIVE if next_fire_at is not None or spec.after is not None else COMPLETED


class Job(JobDependencies, CalendarFollower, JobRestore):
    spec: JobSpec
    status: str
    next_fire_at: FireTime | None
    last_fired_at: FireTime | None
    # Jobs that run after this one (issue 16): its run ends are sent to them.
    dependents: tuple[UUID, ...]
    # The named calendar the spec follows, as last published to the job (issue 20); None
    # too for a job restored from a row of before calendars.
    calendar: AppliedCalendar | None = None
    # The job's version as its users see it (issue 35): the version of the event that last
    # changed its spec or status. Firing moves `version`, not this, so an UpdateJob made
    # with the version read a moment earlier is not refused because the job fired between.
    revision: int = FIRST_REVISION

    @staticmethod
    def create_id(job_id: UUID, **_: Any) -> UUID:
        return job_id

    @event("JobCreated")
    def __init__(self, job_id: UUID, spec: JobSpec, request_id: str | None,
                 next_fire_at: FireTime | None, timestamp: datetime) -> None:
        self.spec = spec
        self.status = _status_for(spec, next_fire_at)
        self.next_fire_at = next_fire_at
        self.last_fired_at = None
        self.dependents = ()
        self.calendar = None
        self.revision = FIRST_REVISION

    @classmethod
    def create(cls, job_id: UUID, spec: JobSpec, request_id: str | None, at: datetime,
               calendar: AppliedCalendar | None = None) -> Job:
        """`calendar`: the api's snapshot of the calendar the spec names."""
        spec = validate_spec(spec)
        _not_after_itself(job_id, spec)
        calendar = named_calendar(spec.calendar, calendar)
        next_fire_at = searched(
            lambda: first_fire_time(spec, spec.schedule(excluded_by(calendar)), at), spec,
            calendar)
        # As Run.schedule does: the class's creation without its argument matching.
        job = cls._create(_CREATED, id=job_id, job_id=job_id, spec=spec,
                          request_id=request_id, next_fire_at=next_fire_at, timestamp=at)
        if calendar is not None:
            job.apply_calendar(calendar, request_id, at)
        return job

    @property
    def schedule(self) -> Schedule:
        cached: Schedule | None = self.__dict__.get("_schedule")
        if cached is None:
            cached = self.spec.schedule(excluded_by(self.calendar))
            self.__dict__["_schedule"] = cached
        return cached

    def fire(self, now: datetime, dispatch_until: datetime | None = None) -> Run:
        """Creates the run of the job's current fire time and advances to the next one; its
        attempt waits (AttemptWaiting) when it starts after `dispatch_until` (a spread)."""

        if self.status != ACTIVE or self.next_fire_at is None:
            raise JobNotActive(f"job {self.id} is {self.status} and has no fire time")
        return self._advance_past(Run.schedule(self, self.next_fire_at, "schedule", at=now,
                                               dispatch_until=dispatch_until), now)

    def miss(self, reason: str, now: datetime) -> Run:
        """Records the job's current fire time as a missed run and advances past it."""

        if self.status != ACTIVE or self.next_fire_at is None:
            raise JobNotActive(f"job {self.id} is {self.status} and has no fire time")
        return self._advance_past(Run.missed(self, self.next_fire_at, reason, at=now), now)

    @property
    def fires_ahead(self) -> bool:
        """Whether the owner may create runs before their time (within its lookahead).

        Under any overlap policy but ALLOW, whether an earlier run is still going can only
        be decided at the fire time itself, so such jobs fire when due, not ahead.
        """
        return self.spec.overlap_policy == OverlapPolicy.ALLOW

    def runs_apart(self, gap: timedelta) -> bool:
        """Whether the job's next fire time is at least `gap` from both its last one and the
        one after it: true of every one-off job and of a cron job that fires every minute or
        less often, false of an every-second one."""
        if self.next_fire_at is None:
            return False
        if self.last_fired_at is not None and self.next_fire_at - self.last_fired_at < gap:
            return False
        following = self.schedule.next_fire_after(self.next_fire_at)
        return following is None or following - self.next_fire_at >= gap

    def fire_due(self, now: datetime, horizon: datetime, catch_up_window: timedelta,
                 limit: int = 1000, unfinished: list[Run] | None = None) -> list[Run]:
        """Invariant 5: every fire time up to the horizon is run or recorded as missed.

        Fire times less than catch_up_window late are simply run late (a scheduler failover
        takes seconds). Older ones follow the misfire policy: RUN_ALL runs them all,
        RUN_LATEST runs the latest and records the others as missed, SKIP records them all.
        Missed fire times are recorded as ranges (JobFireTimesMissed: first, last, count),
        one per stretch, so a job back from a day's pause costs one event, not one per
        fire time; a range counts as one fire time against `limit`.
        A fire time that is to run meets the overlap policy with the job's `unfinished`
        runs (which this call keeps current). Returns every run it created or changed; at
        most `limit` fire times per call, the owner's next cycle goes on from there.
        """
        runs: list[Run] = []
        live = unfinished if unfinished is not None else []
        misfired_before = now - catch_up_window
        policy = self.spec.misfire_policy
        fired = 0
        while (fired < limit and self.status == ACTIVE and self.next_fire_at is not None
               and self.next_fire_at <= horizon):
            fired += 1
            if self.next_fire_at >= misfired_before or policy == MisfirePolicy.RUN_ALL:
                runs.extend(self._fire_overlapping(now, live, horizon))
                continue
            reason = (f"misfired: more than {catch_up_window} late "
                      f"(misfire policy {policy})")
            outcome = self._miss_overdue(misfired_before, reason, now)
            if outcome == _RUN_LATEST:
                runs.extend(self._fire_overlapping(now, live, horizon))
            elif outcome == _CUT_SHORT:
                # One range of bounded work per call: the next cycle records the rest.
                break
        return runs

    def _miss_overdue(self, misfired_before: datetime, reason: str, now: datetime) -> str:
        """Records the overdue fire times from the current one on as one missed range, in
        work bounded whatever their number (see domain/missed_fire_times.py). Under
        RUN_LATEST the latest of them is left as the current fire time, to be run."""
        first = self.next_fire_at
        assert first is not None
        overdue = overdue_range(self.schedule, first, misfired_before)
        run_latest = (self.spec.misfire_policy == MisfirePolicy.RUN_LATEST
                      and overdue.complete)
        if run_latest and overdue.count == 1:
            return _RUN_LATEST
        if run_latest:
            last = last_fire_time_before(self.schedule, first, overdue.last)
            self._record_missed(first, last, overdue.count - 1, reason, overdue.last, now)
            return _RUN_LATEST
        self._record_missed(first, overdue.last, overdue.count, reason,
                            self.schedule.next_fire_after(overdue.last), now)
        return _RECORDED if overdue.complete else _CUT_SHORT

    def _record_missed(self, first: FireTime, last: FireTime, count: int, reason: str,
                       next_fire_at: FireTime | None, now: datetime) -> None:
        self._fire_times_missed(tenant=self.spec.tenant, first=first, last=last, count=count,
                                reason=reason[:2000], next_fire_at=next_fire_at,
                                timestamp=now)
        if next_fire_at is None:
            self._complete(timestamp=now)

    @event("JobFireTimesMissed")
    def _fire_times_missed(self, tenant: str, first: FireTime, last: FireTime, count: int,
                           reason: str, next_fire_at: FireTime | None,
                           timestamp: datetime) -> None:
        # Invariant 5: the range records every fire time first..last; none of them runs.
        self.last_fired_at = last
        self.next_fire_at = next_fire_at

    def _fire_overlapping(self, now: datetime, unfinished: list[Run],
                          dispatch_until: datetime) -> list[Run]:
        """Fires the current fire time under the overlap policy; returns the runs touched."""
        fire_time = self.next_fire_at
        assert fire_time is not None

        def start(hold: bool) -> Run:
            if not hold:
                return self.fire(now, dispatch_until)
            return self._advance_past(Run.schedule(self, fire_time, "schedule", at=now,
                                                   hold=True), now)

        def skip(why: str) -> Run:
            return self._advance_past(Run.skipped(self, fire_time, why, now), now)

        return run_under_policy(self.spec.overlap_policy, unfinished, now, start, skip,
                                f"the run of {fire_time.isoformat()}")

    def backfill(self, request_id: str, after: datetime, until: datetime, now: datetime,
                 unfinished: list[Run], limit: int = MAX_BACKFILL,
                 cascade: bool = False) -> list[Run]:
        """Runs for the job's fire times in (after, until], a past interval.

        Under ALLOW they are all dispatched at once; under any other overlap policy they
        are held and run one at a time, oldest first, after the job's unfinished runs, so a
        backfill never overlaps another run of the job.
        """
        if self.status == DELETED:
            raise JobNotActive(f"job {self.id} is deleted")
        times = backfill_fire_times(self.schedule, after, until, now, limit)
        hold = self.spec.overlap_policy != OverlapPolicy.ALLOW
        chain = Chain(cascade=request_id) if cascade else Chain()
        runs = [Run.schedule(self, t, "backfill", at=now, hold=hold, not_before=now,
                             run_id=backfill_run_id(self.id, request_id, t), chain=chain)
                for t in times]
        self._backfill_requested(request_id=request_id, after=after, until=until,
                                 runs=len(runs), timestamp=now)
        unfinished.extend(runs)
        return runs

    @event("JobBackfillRequested")
    def _backfill_requested(self, request_id: str, after: datetime, until: datetime,
                            runs: int, timestamp: datetime) -> None:
        pass

    def _advance_past(self, run: Run, now: datetime) -> Run:
        fired_at = run.scheduled_at
        next_fire_at = self.schedule.next_fire_after(fired_at)
        # The event _advance triggers, without the decorator's per-call argument matching
        # (every argument is given by name): once per fire time, on the owner's hot path.
        self.trigger_event(_FIRE_ADVANCED, fired_at=fired_at, run_id=run.id,
                           next_fire_at=next_fire_at, timestamp=now)
        if next_fire_at is None:
            self._complete(timestamp=now)
        return run

    @event("JobFireAdvanced")
    def _advance(self, fired_at: FireTime, run_id: UUID, next_fire_at: FireTime | None,
                 timestamp: datetime) -> None:
        self.last_fired_at = fired_at
        self.next_fire_at = next_fire_at

    def _revise(self) -> None:
        # Called in the body of an event that changes the spec or the status. eventsourcing
        # sets the aggregate's version after the body runs, so this event's is one more.
        self.revision = self.version + 1

    @event("JobCompleted")
    def _complete(self, timestamp: datetime) -> None:
        self._revise()
        self.status = COMPLETED
        self.next_fire_at = None

    def pause(self, request_id: str | None, at: datetime) -> None:
        if self.status != ACTIVE:
            raise JobNotActive(f"job {self.id} is {self.status}, not active")
        self._paused(request_id=request_id, timestamp=at)

    @event("JobPaused")
    def _paused(self, request_id: str | None, timestamp: datetime) -> None:
        self._revise()
        self.status = PAUSED

    def resume(self, request_id: str | None, at: datetime) -> None:
        if self.status != PAUSED:
            raise JobNotActive(f"job {self.id} is {self.status}, not paused")
        # Fire times that passed while paused are not dropped: the owner meets them as
        # overdue and handles them by the misfire policy.
        if self.last_fired_at is None:
            next_fire_at = first_fire_time(self.spec, self.schedule, self.created_on)
        else:
            next_fire_at = self.schedule.next_fire_after(self.last_fired_at)
        self._resumed(request_id=request_id, next_fire_at=next_fire_at, timestamp=at)

    @event("JobResumed")
    def _resumed(self, request_id: str | None, next_fire_at: FireTime | None,
                 timestamp: datetime) -> None:
        self._revise()
        self.status = _status_for(self.spec, next_fire_at)
        self.next_fire_at = next_fire_at

    def trigger(self, request_id: str, at: datetime, cascade: bool = False) -> Run:
        """A manual run now, outside the schedule; its id derives from the request id. A
        cascading one starts a chain of its own, named by the request id."""
        if self.status == DELETED:
            raise JobNotActive(f"job {self.id} is deleted")
        return Run.schedule(self, at, trigger="manual", at=at,
                            run_id=manual_run_id(self.id, request_id),
                            chain=Chain(cascade=request_id) if cascade else Chain())

    def delete(self, request_id: str | None, at: datetime) -> None:
        if self.status == DELETED:
            return
        if self.dependents:
            named = ", ".join(map(str, self.dependents[:5]))
            more = f" and {len(self.dependents) - 5} more" if len(self.dependents) > 5 else ""
            raise DependentsRemain(f"job {self.id} has dependent jobs ({named}{more}); "
                                   "remove it from their 'after' first")
        self._deleted(request_id=request_id, timestamp=at)

    @event("JobDeleted")
    def _deleted(self, request_id: str | None, timestamp: datetime) -> None:
        self._revise()
        self.status = DELETED
        self.next_fire_at = None

    def update(self, spec: JobSpec, request_id: str | None, at: datetime,
               expected_version: int = 0, calendar: AppliedCalendar | None = None) -> None:
        """Replaces the spec; expected_version 0 means any, else it must be the revision.
        `calendar`: the api's snapshot of the calendar the spec names."""
        if self.status == DELETED:
            raise JobNotActive(f"job {self.id} is deleted")
        if expected_version and expected_version != self.revision:
            raise StaleVersion(f"job {self.id} is at version {self.revision}, "
                               f"not {expected_version}")
        spec = validate_spec(spec)
        _not_after_itself(self.id, spec)
        if spec.tenant != self.spec.tenant:
            raise InvalidSpec("spec.tenant", "a job cannot move to another tenant")
        after = max(at, self.last_fired_at) if self.last_fired_at else at
        calendar = newest(self.calendar, named_calendar(spec.calendar, calendar))
        next_fire_at = searched(
            lambda: spec.schedule(excluded_by(calendar)).next_fire_after(after), spec, calendar)
        self._updated(spec=spec, request_id=request_id, timestamp=at, next_fire_at=next_fire_at)
        if calendar is not None:
            self.apply_calendar(calendar, request_id, at)

    @event("JobUpdated")
    def _updated(self, spec: JobSpec, request_id: str | None, next_fire_at: FireTime | None,
                 timestamp: datetime) -> None:
        self._revise()
        self.spec = spec
        if self.calendar is not None and self.calendar.name != spec.calendar:
            self.calendar = None  # the spec names another calendar, or none
        self.__dict__.pop("_schedule", None)
        if self.status == ACTIVE:
            self.next_fire_at = next_fire_at


def _not_after_itself(job_id: UUID, spec: JobSpec) -> None:
    if spec.after is not None and job_id in spec.after.job_ids:
        raise InvalidSpec("spec.after.job_ids", "a job cannot run after itself")


# The event class @event("JobFireAdvanced") made, which Job._advance_past triggers itself.
_FIRE_ADVANCED: type[Any] = Job.__dict__[JobEvent.FIRE_ADVANCED]
# The event class @event("JobCreated") made, which Job.create builds itself.
_CREATED: type[Any] = Job.__dict__[JobEvent.CREATED]
