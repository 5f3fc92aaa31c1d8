"""The search cronlog used before issue 33, kept as the reference the compiled search
(src/cronlog/domain/schedule_search.py) must agree with: a walk over every day of up to 8
years per search, asking zoneinfo about every local time, and exclusions refused one fire
time at a time. Slow (0.3 s for the issue's worst case), and exact by construction."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from cronlog.domain.bounds import END_OF_TIME
from cronlog.domain.cron import CronFields, parse_cron
from cronlog.domain.exclusions import LAST_DAY, Exclusions, first_instant_of
from cronlog.domain.schedule import (
    BoundedSchedule,
    FireTime,
    Schedule,
    _clamped,
    _gap_end,
    _in_range_or_none,
    local_instants,
    zone_named,
)

SEARCH_DAYS = 366 * 8 + 2
FIXED_OFFSET_WINDOW = timedelta(hours=48)
OFFSET_PROBES = tuple(timedelta(hours=h) for h in (-26, -12, 12, 24, 36, 48))


@dataclass(frozen=True)
class ReferenceCronSchedule:
    fields: CronFields
    zone: ZoneInfo

    def next_fire_after(self, after: datetime) -> FireTime | None:
        start = _clamped(after)
        if start is None:
            return None
        fast = self._next_with_fixed_offset(start)
        return (_in_range_or_none(fast) if fast is not None
                else _in_range_or_none(self._next_across_offsets(start)))

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



@dataclass(frozen=True)
class ReferenceExcludingSchedule:
    """`inner` without the fire times whose local date in `zone` is excluded.

    Bounded work whatever the exclusions and the inner schedule: a fire time on an excluded
    day resumes the search from the first instant after that excluded range, so there is
    at most one search of the inner schedule per range, and never one per excluded fire
    time (a year excluded from an every-second job is one search, not 31 million)."""

    inner: Schedule
    exclusions: Exclusions
    zone: ZoneInfo

    def excludes(self, instant: datetime) -> bool:
        return self.exclusions.excludes(instant.astimezone(self.zone).date())

    def next_fire_after(self, after: datetime) -> FireTime | None:
        cursor = after
        while (candidate := self.inner.next_fire_after(cursor)) is not None:
            excluded = self.exclusions.range_of(candidate.astimezone(self.zone).date())
            if excluded is None:
                return candidate
            if excluded.last >= LAST_DAY:
                return None  # excluded to the end of the accepted range
            resume = first_instant_of(excluded.last + timedelta(days=1), self.zone)
            # Fire times at the first instant of the day after count: search from just
            # before it. The search always moves forward, even where a zone's rules bend.
            cursor = max(resume.astimezone(UTC) - timedelta(microseconds=1), candidate)
        return None




def reference(expression: str, time_zone: str, exclusions: Exclusions | None = None,
              start_at: datetime | None = None, end_at: datetime | None = None) -> Schedule:
    """The reference schedule of a spec's parts, shaped as JobSpec.schedule() shapes it."""
    inner: Schedule = ReferenceCronSchedule(parse_cron(expression), zone_named(time_zone))
    if start_at is not None or end_at is not None:
        inner = BoundedSchedule(inner, start_at, end_at)
    if exclusions:
        return ReferenceExcludingSchedule(inner, exclusions.normalised(), zone_named(time_zone))
    return inner
