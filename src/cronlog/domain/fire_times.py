"""A job's fire times outside its regular advance: its first, a backfill's, and a search
that names what made it too costly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cronlog.domain.bounds import in_range, require_interval
from cronlog.domain.errors import InvalidSpec, ScheduleTooCostly
from cronlog.domain.exclusions import AppliedCalendar, ExcludingSchedule
from cronlog.domain.schedule import FireTime, Schedule
from cronlog.domain.spec import JobSpec

MAX_BACKFILL = 1000


def searched(search: Callable[[], FireTime | None], spec: JobSpec,
             calendar: AppliedCalendar | None) -> FireTime | None:
    """A next fire time the job's owner searches for; a search past the bound
    (schedule_search.BOUND_TEXT) is ScheduleTooCostly naming what made it costly: a command
    is refused (INVALID_ARGUMENT), a job being fired is set aside (invariant 9)."""
    try:
        return search()
    except ScheduleTooCostly as exc:
        field = ("spec.calendar" if calendar is not None and calendar.effective
                 else "spec.exclusions" if spec.exclusions else "spec.schedule.cron")
        raise ScheduleTooCostly(field, exc.message) from exc


def first_fire_time(spec: JobSpec, schedule: Schedule, at: datetime) -> FireTime | None:
    """A cron job first fires strictly after its creation; a one-off fires at its time, at
    once if that time has passed."""
    if spec.at is not None:
        if spec.end_at is not None and spec.at > spec.end_at:
            return None
        if spec.start_at is not None and spec.at < spec.start_at:
            return None
        if isinstance(schedule, ExcludingSchedule) and schedule.excludes(spec.at):
            return None  # on an excluded day: not a fire time (issue 20)
        # A stored spec older than the bounds may hold any instant: never fire outside them.
        return spec.at if in_range(spec.at) else None
    return schedule.next_fire_after(at)


def backfill_fire_times(schedule: Schedule, after: datetime, until: datetime, now: datetime,
                        limit: int = MAX_BACKFILL) -> list[FireTime]:
    """A backfill's fire times: the schedule's in (after, until], a past interval."""
    after, until = require_interval(after, until)
    if until <= after:
        raise InvalidSpec("until", "must be after from")
    if until > now:
        raise InvalidSpec("until", "a backfill covers past fire times only")
    times: list[FireTime] = []
    cursor = schedule.next_fire_after(after)
    while cursor is not None and cursor <= until:
        times.append(cursor)
        if len(times) > limit:
            raise InvalidSpec("from", f"more than {limit} fire times in the interval; "
                                      "backfill it in parts")
        cursor = schedule.next_fire_after(cursor)
    if not times:
        raise InvalidSpec("from", "the job has no fire time in the interval")
    return times
