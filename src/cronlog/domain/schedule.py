"""When a job fires: cron schedules in the job's own time zone, intervals, and one-off
schedules.

Invariant 7 (time is explicit, and DST follows Debian cron) lives here. Every function
takes the instant it reasons from; nothing reads the clock. Across DST changes, as Debian's
cron does (its MIN_STAR / HR_STAR flags; domain/cron.py, follows_elapsed_time):
- a fixed job (no time-of-day field starts with `*`: `30 2 * * *`, `0 0-6/3 * * *`) fires
  a local time that does not exist (spring forward) once, at the first instant after the
  gap, and a local time that occurs twice (fall back) once, at its first occurrence;
- any other job (`*/15 2 * * *`, `0 * * * *`) follows elapsed time: it fires at every real
  instant whose local time matches, so in both repeated occurrences and never for the
  local times inside a gap.

No schedule computes past the accepted range (domain/bounds.py): asked from any instant,
even one far outside it from an old stored event, a schedule answers a fire time inside the
range or None, and never raises OverflowError.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronlog.domain.bounds import (
    BEFORE_EARLIEST,
    EARLIEST_INSTANT,
    END_OF_TIME,
    MOST_PREVIEWED,
    RANGE_TEXT,
    in_range,
    require_count,
)
from cronlog.domain.cron import CronFields, parse_cron
from cronlog.domain.errors import InvalidSpec

FireTime = datetime  # an aware UTC instant at which a job is due

# A schedule that matches no date within this many days never fires (e.g. 30 February).
SEARCH_DAYS = 366 * 8 + 2


# The fast path of CronSchedule applies while the zone's offset is the same at `after` and
# at each probe: DST changes are months apart, so none hides between probes 12 h apart.
FIXED_OFFSET_WINDOW = timedelta(hours=48)
OFFSET_PROBES = tuple(timedelta(hours=h) for h in (-26, -12, 12, 24, 36, 48))


MAX_ZONE_CHARS = 64


def zone_named(name: str, field: str = "spec.time_zone") -> ZoneInfo:
    if not name:
        raise InvalidSpec(field, "a time zone is required (an IANA name such as Europe/Berlin)")
    if len(name) > MAX_ZONE_CHARS:
        raise InvalidSpec(field, f"a time zone name is at most {MAX_ZONE_CHARS} characters")
    try:
        return ZoneInfo(name)
    # A directory of the zone database ("America") is an OSError, not "not found".
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidSpec(field, f"unknown time zone {name!r}") from exc


def require_aware(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSpec(field, "a time must carry its UTC offset")
    return value.astimezone(UTC)


class Schedule(Protocol):
    def next_fire_after(self, after: datetime) -> FireTime | None: ...


def preview(schedule: Schedule, after: datetime, count: int,
            until: datetime | None = None) -> list[FireTime]:
    """The next `count` fire times strictly after `after` (and not after `until`); at most
    MOST_PREVIEWED, and none at or past the end of the accepted range."""
    require_count(count, "count", MOST_PREVIEWED)
    times: list[FireTime] = []
    for nxt in iter_fire_times(schedule, after):
        if len(times) >= count or (until is not None and nxt > until):
            break
        times.append(nxt)
    return times


def _clamped(after: datetime) -> datetime | None:
    """`after` in UTC, raised to just before the range when it lies before it; None when it
    lies at or past the range's end, where no fire time can follow. Compares before any
    arithmetic, which is what overflows on extreme instants."""
    if after >= END_OF_TIME:
        return None
    if after < EARLIEST_INSTANT:
        return BEFORE_EARLIEST
    return after.astimezone(UTC)


def _in_range_or_none(instant: FireTime | None) -> FireTime | None:
    return instant if instant is not None and in_range(instant) else None


def _gap_end(local: datetime, zone: ZoneInfo) -> datetime:
    """The first instant whose local time is past `local`, which falls in a DST gap."""
    # With fold=1 zoneinfo reads a gap time with the offset after the change, which lands
    # before the transition; with fold=0 it lands after. The transition lies between.
    low = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
    high = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if low > high:
        low, high = high, low
    while high - low > timedelta(seconds=1):
        mid = low + (high - low) / 2
        mid = mid.replace(microsecond=0)
        if mid.astimezone(zone).replace(tzinfo=None) > local:
            high = mid
        else:
            low = mid
    return high


def local_instants(local: datetime, zone: ZoneInfo, follow_elapsed: bool) -> list[datetime]:
    """The UTC instants at which the naive local time `local` fires in `zone`."""
    first = local.replace(tzinfo=zone, fold=0)
    second = local.replace(tzinfo=zone, fold=1)
    u0 = first.astimezone(UTC)
    u1 = second.astimezone(UTC)
    exists = u0.astimezone(zone).replace(tzinfo=None) == local
    if not exists:
        return [] if follow_elapsed else [_gap_end(local, zone)]
    if u0 == u1:
        return [u0]
    # Ambiguous: the local time happens twice.
    return sorted({u0, u1}) if follow_elapsed else [min(u0, u1)]


# How many answers a schedule remembers (see CronSchedule._answers).
REMEMBERED_ANSWERS = 4096
_UNKNOWN = object()


@dataclass(frozen=True)
class CronSchedule:
    fields: CronFields
    zone: ZoneInfo
    # next_fire_after is a pure function of the schedule and `after`, and schedules are
    # shared by expression and zone (_parse_cached): the many jobs of one expression fire
    # at the same instants and ask the same question, answered once. Emptied when full.
    _answers: dict[datetime, FireTime | None] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)

    @classmethod
    def parse(cls, expression: str, time_zone: str, field: str = "spec.schedule.cron",
              zone_field: str = "spec.time_zone") -> CronSchedule:
        return _parse_cached(expression, time_zone, field, zone_field)

    def next_fire_after(self, after: datetime) -> FireTime | None:
        start = _clamped(after)
        if start is None:
            return None
        # Keyed by the instant in UTC: one tzinfo and no folds, so equal keys are one
        # instant (two local times of one zone compare by wall time, fold ignored).
        answers = self._answers
        answer = answers.get(start, _UNKNOWN)
        if answer is not _UNKNOWN:
            return answer  # type: ignore[return-value]
        fast = self._next_with_fixed_offset(start)
        answer = (_in_range_or_none(fast) if fast is not None
                  else _in_range_or_none(self._next_across_offsets(start)))
        if len(answers) >= REMEMBERED_ANSWERS:
            answers.clear()
        answers[start] = answer
        return answer

    def _next_with_fixed_offset(self, after: datetime) -> FireTime | None:
        """The common case, cheaply: while the zone keeps one UTC offset around `after`,
        local time is UTC plus that offset, every local time exists once, and the next fire
        time is the next matching local time. None when the window holds a DST change or
        no fire time; the general search below then decides."""
        # zone.utcoffset(dt) would read dt's wall clock as local time: ask of the instant.
        offset = after.astimezone(self.zone).utcoffset()
        window_end = after + FIXED_OFFSET_WINDOW
        if offset is None or any((after + step).astimezone(self.zone).utcoffset() != offset
                                 for step in OFFSET_PROBES):
            return None
        local_after = (after + offset).replace(tzinfo=None)
        fields = self.fields
        start_day = local_after.date()
        day = start_day
        while True:
            if datetime(day.year, day.month, day.day) - offset > window_end.replace(tzinfo=None):
                return None
            if fields.matches_date(day):
                found = self._first_local_after(day, local_after if day == start_day else None)
                if found is not None:
                    instant = (found - offset).replace(tzinfo=UTC)
                    return instant if instant <= window_end else None
            day += timedelta(days=1)

    def _first_local_after(self, day: date, after: datetime | None) -> datetime | None:
        """The day's first local time that matches, strictly after `after` (on that day)
        when given. The fields are sorted: the first hour, minute and second not before
        `after`'s are found by bisection rather than by trying each."""
        fields = self.fields
        hours, minutes, seconds = fields.hours, fields.minutes, fields.seconds
        if after is None:
            return datetime(day.year, day.month, day.day, hours[0], minutes[0], seconds[0])
        for hour in hours[bisect_left(hours, after.hour):]:
            if hour > after.hour:
                return datetime(day.year, day.month, day.day, hour, minutes[0], seconds[0])
            for minute in minutes[bisect_left(minutes, after.minute):]:
                if minute > after.minute:
                    return datetime(day.year, day.month, day.day, hour, minute, seconds[0])
                # The same minute: a second that is equal is not after (after's
                # microseconds are at least 0).
                later = bisect_right(seconds, after.second)
                if later < len(seconds):
                    return datetime(day.year, day.month, day.day, hour, minute,
                                    seconds[later])
        return None

    def _next_across_offsets(self, after: datetime) -> FireTime | None:
        # Start a day early: an instant's local date can differ around ambiguous hours.
        day = after.astimezone(self.zone).date() - timedelta(days=1)
        # Local dates run at most a day ahead of UTC: past this one every instant is out of
        # range, and stopping here keeps the search from running towards datetime's limit.
        last_day = END_OF_TIME.date() + timedelta(days=1)
        best: FireTime | None = None
        for _ in range(SEARCH_DAYS):
            if day > last_day:
                return best
            if self.fields.matches_date(day):
                found, settled = self._first_in_day(day, after)
                if found is not None and (best is None or found < best):
                    best = found
                if settled:
                    return best
            day += timedelta(days=1)
        return best

    def _first_in_day(self, day: date, after: datetime) -> tuple[FireTime | None, bool]:
        """The earliest fire time after `after` among the day's local times, and whether it
        is settled: whether a local time was found whose every instant lies after `after`.
        Until then a later local time may still come first, when a repeated span does not
        end on the hour (Chatham's 02:45-03:45: the second 02:52 follows the first 03:00)."""
        elapsed = self.fields.follows_elapsed_time
        best: FireTime | None = None
        for hour in self.fields.hours:
            last = datetime(day.year, day.month, day.day, hour, 59, 59)
            if max(local_instants(last, self.zone, True) or
                   [_gap_end(last, self.zone)]) <= after:
                continue
            found, settled = self._first_in_hour(day, hour, after, elapsed)
            if found is not None and (best is None or found < best):
                best = found
            if settled:
                return best, True
        return best, False

    def _first_in_hour(self, day: date, hour: int, after: datetime,
                       elapsed: bool) -> tuple[FireTime | None, bool]:
        best: datetime | None = None
        for minute in self.fields.minutes:
            minute_end = datetime(day.year, day.month, day.day, hour, minute, 59)
            if max(local_instants(minute_end, self.zone, True) or
                   [_gap_end(minute_end, self.zone)]) <= after:
                continue
            for second in self.fields.seconds:
                local = datetime(day.year, day.month, day.day, hour, minute, second)
                instants = local_instants(local, self.zone, elapsed)
                later = [u for u in instants if u > after]
                if later and (best is None or later[0] < best):
                    best = later[0]
                if instants and min(instants) > after:
                    # Local times map to instants in order within each occurrence, so no
                    # later local time can fire before this one's first instant.
                    return best, True
        return best, False


@lru_cache(maxsize=4096)
def _parse_cached(expression: str, time_zone: str, field: str,
                  zone_field: str) -> CronSchedule:
    """Jobs are rebuilt from their rows every time they are due; parsing their schedule
    (and probing that it ever fires) once per expression and zone is enough."""
    schedule = CronSchedule(parse_cron(expression, field), zone_named(time_zone, zone_field))
    # Every date that cron can name recurs within SEARCH_DAYS, so one search from the start
    # of the range finds a fire time of any expression that has one.
    if schedule.next_fire_after(BEFORE_EARLIEST) is None:
        raise InvalidSpec(field, f"{expression!r} never fires: no date matches it "
                                 f"{RANGE_TEXT} (is it a day that does not exist, "
                                 "such as 30 February?)")
    return schedule


@dataclass(frozen=True)
class OneOffSchedule:
    at: FireTime

    def next_fire_after(self, after: datetime) -> FireTime | None:
        # An `at` out of range can only come from an event stored before the range existed.
        return self.at if self.at > after and in_range(self.at) else None


# An interval job fires at least a second apart (a worker's poll loop could not keep up with
# less) and at least once a year and a day (a longer wait is a one-off job, or a cron one).
SHORTEST_INTERVAL = timedelta(seconds=1)
LONGEST_INTERVAL = timedelta(days=366)
# With no start_at an interval's grid starts at the Unix epoch, as Temporal's interval with
# phase 0 does: the spec alone decides the fire times, so a preview, an update that keeps
# the interval and a replay of the log all give the same ones.
INTERVAL_EPOCH = EARLIEST_INSTANT


@dataclass(frozen=True)
class IntervalSchedule:
    """Every `every` of elapsed time, on the grid through `phase`: phase + k * every for
    every whole k. Elapsed time by nature, so DST never moves nor merges a fire time; the
    zone only names the wall time it falls on."""

    every: timedelta
    phase: datetime = INTERVAL_EPOCH

    @classmethod
    def checked(cls, every: timedelta, phase: datetime | None,
                field: str = "spec.schedule.every") -> IntervalSchedule:
        if every < SHORTEST_INTERVAL or every > LONGEST_INTERVAL:
            raise InvalidSpec(field, f"must be between 1s and {LONGEST_INTERVAL.days} days, "
                                     f"got {every.total_seconds()}s")
        if every % timedelta(milliseconds=1):
            raise InvalidSpec(field, "must be a whole number of milliseconds, got "
                                     f"{every.total_seconds()}s")
        return cls(every, INTERVAL_EPOCH if phase is None else phase.astimezone(UTC))

    def next_fire_after(self, after: datetime) -> FireTime | None:
        start = _clamped(after)
        if start is None:
            return None
        if start < self.phase:
            # Earlier grid points exist too, but a bounded job's start_at is its phase, and
            # an unbounded one's phase is the start of the range: none lie in range before.
            return _in_range_or_none(self.phase)
        steps = (start - self.phase) // self.every + 1
        # Compared before adding: a phase and interval near the range's end cannot overflow.
        if steps * self.every >= END_OF_TIME - self.phase:
            return None
        return _in_range_or_none(self.phase + steps * self.every)


@dataclass(frozen=True)
class AfterUpstreams:
    """The schedule of a job that runs `after` other jobs: it has no fire times of its own;
    its runs follow its upstream runs' ends (domain/fan_in.py)."""

    def next_fire_after(self, after: datetime) -> FireTime | None:
        return None


@dataclass(frozen=True)
class BoundedSchedule:
    """A schedule that never fires before start_at or after end_at."""

    inner: Schedule
    start_at: datetime | None = None
    end_at: datetime | None = None

    def next_fire_after(self, after: datetime) -> FireTime | None:
        if self.start_at is not None and after < self.start_at:
            # Fire times at exactly start_at count. A start before the range (or past it)
            # is compared, never shifted, so that it cannot overflow.
            if self.start_at >= END_OF_TIME:
                return None
            after = (self.start_at - timedelta(microseconds=1)
                     if self.start_at > EARLIEST_INSTANT else BEFORE_EARLIEST)
        nxt = _in_range_or_none(self.inner.next_fire_after(after))
        if nxt is None or (self.end_at is not None and nxt > self.end_at):
            return None
        return nxt


def iter_fire_times(schedule: Schedule, after: datetime) -> Iterator[FireTime]:
    """Fire times strictly after `after`, in order, ending at the end of the range."""
    cursor = after
    while (nxt := schedule.next_fire_after(cursor)) is not None:
        # A schedule that does not move forward, or leaves the range, has no more to give.
        if nxt <= cursor or not in_range(nxt):
            return
        yield nxt
        cursor = nxt
