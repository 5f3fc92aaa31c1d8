"""Overdue fire times as a range: how many there are and which is the last, in bounded work.

A job that comes back after a long pause (or a long outage) has fire times that are too late
to run. Recording them one by one costs one event and one schedule evaluation each: a day
of an every-second job is 86,400 of both. Here they are counted instead: a cron schedule
by arithmetic over the zone's constant-offset stretches (a few operations per day of the
range), an interval by division, anything else by stepping, and the last one is found by
bisection. Work per range is bounded by MAX_RANGE_SPAN and MAX_STEPS, whatever the number
of fire times: a longer stretch is recorded as several ranges over successive cycles.

Invariant 7's DST rules are kept because the count follows them exactly: a schedule that
follows elapsed time fires at every instant whose local time matches (a constant-offset
stretch maps local times to instants one to one); a fixed one is stepped through with the
schedule itself around each offset change, where gaps and repeated hours bend its rules.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

from cronlog.domain.cron import CronFields
from cronlog.domain.exclusions import LAST_DAY, ExcludingSchedule, first_instant_of
from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    FireTime,
    IntervalSchedule,
    Schedule,
)

# One range covers at most this much time: a longer overdue stretch becomes several ranges,
# one per cycle, so the arithmetic per range stays a few hundred operations.
MAX_RANGE_SPAN = timedelta(days=92)
# Schedule evaluations a count may step through (non-cron schedules, and a fixed cron job's
# fire times around an offset change) before the range is cut short.
MAX_STEPS = 2000
_TICK = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
# Offset changes are months apart: probing every 12 h finds each one (schedule.py assumes
# the same).
_PROBE = timedelta(hours=12)
# Around an offset change a fixed job's fire times are stepped through, not counted.
_CHANGE_MARGIN = timedelta(hours=1)
# Farther than any offset change reaches (Samoa once skipped a whole day).
_NEARBY_CHANGE = timedelta(days=2)


@dataclass(frozen=True)
class OverdueRange:
    """The overdue fire times first..last, count of them. `complete`: the range reaches the
    misfire boundary (no overdue fire time after `last`); otherwise it was cut short to
    bound the work, and the rest is another range."""

    first: FireTime
    last: FireTime
    count: int
    complete: bool


class _OverBudget(Exception):
    """Counting would take more schedule evaluations than allowed."""


def overdue_range(schedule: Schedule, first: FireTime, boundary: datetime) -> OverdueRange:
    """The fire times in [first, boundary), `first` being one of them, or as many of them as
    bounded work reaches (always at least `first`)."""
    end = min(boundary, first + MAX_RANGE_SPAN)
    try:
        # `first` is counted on its own: it is the job's next fire time, a fire time even if
        # the schedule's stepping would not reproduce it.
        count = 1 + count_fire_times(schedule, first + _TICK, end, MAX_STEPS)
    except _OverBudget:
        return _stepped_range(schedule, first, boundary)
    last = last_fire_time_before(schedule, first, end) if count > 1 else first
    return OverdueRange(first, last, count, complete=end == boundary)


def _stepped_range(schedule: Schedule, first: FireTime, boundary: datetime) -> OverdueRange:
    last, count = first, 1
    while count < MAX_STEPS:
        following = schedule.next_fire_after(last)
        if following is None or following >= boundary:
            return OverdueRange(first, last, count, complete=True)
        last, count = following, count + 1
    following = schedule.next_fire_after(last)
    return OverdueRange(first, last, count,
                        complete=following is None or following >= boundary)


def last_fire_time_before(schedule: Schedule, known: FireTime, before: datetime) -> FireTime:
    """The latest fire time earlier than `before`, given `known`, a fire time earlier than
    it. Bisection over time, with a jump to each fire time found: about two evaluations per
    halving, some fifty for a range of months."""
    low, top = known, before  # the answer is in [low, top); no fire time in [top, before)
    while True:
        following = schedule.next_fire_after(low)
        if following is None or following >= top:
            return low
        low = following
        mid = low + (top - low) / 2
        probe = schedule.next_fire_after(mid)
        if probe is not None and probe < top:
            low = probe
        else:
            top = mid + _TICK


def count_fire_times(schedule: Schedule, lo: datetime, hi: datetime, max_steps: int) -> int:
    """How many fire times lie in [lo, hi). Raises _OverBudget past max_steps evaluations."""
    if hi <= lo:
        return 0
    if isinstance(schedule, BoundedSchedule):
        start = lo if schedule.start_at is None else max(lo, schedule.start_at)
        stop = hi if schedule.end_at is None else min(hi, schedule.end_at + _TICK)
        return count_fire_times(schedule.inner, start, stop, max_steps)
    if isinstance(schedule, CronSchedule):
        return _count_cron(schedule, lo, hi, max_steps)
    if isinstance(schedule, IntervalSchedule):
        return _count_interval(schedule, lo, hi)
    if isinstance(schedule, ExcludingSchedule):
        return _count_excluding(schedule, lo, hi, max_steps)
    return _count_by_stepping(schedule, lo, hi, max_steps)


def _count_excluding(schedule: ExcludingSchedule, lo: datetime, hi: datetime,
                     max_steps: int) -> int:
    """The inner schedule's count less its count within each excluded range (from the
    first instant of its first day to the first instant of the day after): a few counts
    per range that meets [lo, hi), whatever the number of fire times (issue 20)."""
    zone = schedule.zone
    count = count_fire_times(schedule.inner, lo, hi, max_steps)
    first_day = lo.astimezone(zone).date() - timedelta(days=1)
    last_day = hi.astimezone(zone).date() + timedelta(days=1)
    for excluded in schedule.exclusions.normalised().ranges:
        if excluded.last < first_day or excluded.first > last_day:
            continue
        start = max(lo, first_instant_of(excluded.first, zone))
        end = hi if excluded.last >= LAST_DAY else min(
            hi, first_instant_of(excluded.last + timedelta(days=1), zone))
        count -= count_fire_times(schedule.inner, start, end, max_steps)
    return count


def _count_by_stepping(schedule: Schedule, lo: datetime, hi: datetime, max_steps: int) -> int:
    count = 0
    cursor = schedule.next_fire_after(lo - _TICK)
    while cursor is not None and cursor < hi:
        count += 1
        if count > max_steps:
            raise _OverBudget
        cursor = schedule.next_fire_after(cursor)
    return count


def _count_interval(schedule: IntervalSchedule, lo: datetime, hi: datetime) -> int:
    first = schedule.next_fire_after(lo - _TICK)
    if first is None or first >= hi:
        return 0
    # Grid points first, first + every, ... before hi; none past the range (hi is in it).
    return -((first - hi) // schedule.every)


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset


def offset_changes(zone: ZoneInfo, lo: datetime, hi: datetime) -> list[datetime]:
    """The instants in (lo, hi) at which the zone's UTC offset changes (whole seconds)."""
    changes: list[datetime] = []
    cursor, offset = lo, _offset(lo, zone)
    while cursor < hi:
        probe = min(cursor + _PROBE, hi)
        probe_offset = _offset(probe, zone)
        if probe_offset != offset:
            before, after = cursor, probe  # offset at `before` is `offset`, at `after` not
            while after - before > _SECOND:
                mid = (before + (after - before) / 2).replace(microsecond=0)
                if mid <= before:
                    mid = before + _SECOND
                if _offset(mid, zone) == offset:
                    before = mid
                else:
                    after = mid
            changes.append(after)
            offset = probe_offset
        cursor = probe
    return [c for c in changes if lo < c < hi]


def _count_cron(schedule: CronSchedule, lo: datetime, hi: datetime, max_steps: int) -> int:
    lo, hi = lo.astimezone(UTC), hi.astimezone(UTC)
    zone = schedule.zone
    if schedule.fields.follows_elapsed_time:
        # Every instant whose local time matches: count each constant-offset stretch.
        edges = [lo, *offset_changes(zone, lo, hi), hi]
        return sum(_count_local(schedule.fields, a, b, _offset(a, zone))
                   for a, b in pairwise(edges))
    # A fixed job: gaps and repeated hours around a change are stepped through with the
    # schedule itself; between them every local time is one instant. A change just
    # outside [lo, hi) still bends the times inside (the hour repeated after it).
    count, cursor, steps = 0, lo, max_steps
    for change in offset_changes(zone, lo - _NEARBY_CHANGE, hi + _NEARBY_CHANGE):
        jump = abs(_offset(change, zone) - _offset(change - _SECOND, zone))
        window_start = max(cursor, change - jump - _CHANGE_MARGIN)
        window_end = min(hi, change + jump + _CHANGE_MARGIN)
        if window_end <= window_start:
            continue
        count += _count_local(schedule.fields, cursor, window_start, _offset(cursor, zone))
        stepped = _count_by_stepping(schedule, window_start, window_end, steps)
        steps -= stepped
        count += stepped
        cursor = window_end
    return count + _count_local(schedule.fields, cursor, hi, _offset(cursor, zone))


def _count_local(fields: CronFields, lo: datetime, hi: datetime, offset: timedelta) -> int:
    """Matching local times in [lo + offset, hi + offset), for a stretch of one offset."""
    if hi <= lo:
        return 0
    start = (lo + offset).replace(tzinfo=None)
    stop = (hi + offset).replace(tzinfo=None)
    per_day = len(fields.hours) * len(fields.minutes) * len(fields.seconds)
    count = 0
    day = start.date()
    last_day = stop.date()
    while day <= last_day:
        if fields.matches_date(day):
            from_second = _ceil_second(start) if day == start.date() else 0
            to_second = _ceil_second(stop) if day == last_day else 86_400
            if from_second == 0 and to_second == 86_400:
                count += per_day
            else:
                count += _times_before(fields, to_second) - _times_before(fields, from_second)
        day += timedelta(days=1)
    return count


def _ceil_second(moment: datetime) -> int:
    """Seconds since the local midnight of `moment`, rounded up to a whole second."""
    midnight = datetime.combine(date(moment.year, moment.month, moment.day), time())
    elapsed = moment - midnight
    whole = elapsed.days * 86_400 + elapsed.seconds
    return whole + (1 if elapsed.microseconds else 0)


def _times_before(fields: CronFields, second_of_day: int) -> int:
    """How many of the day's matching times of day come before `second_of_day`."""
    if second_of_day >= 86_400:
        return len(fields.hours) * len(fields.minutes) * len(fields.seconds)
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    per_hour = len(fields.minutes) * len(fields.seconds)
    count = bisect_left(fields.hours, hour) * per_hour
    if hour in fields.hours:
        count += bisect_left(fields.minutes, minute) * len(fields.seconds)
        if minute in fields.minutes:
            count += bisect_left(fields.seconds, second)
    return count
