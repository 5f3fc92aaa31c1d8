"""A cron expression compiled for searches (issue 33): the days it matches as bit masks per
year, and its times of day by bisection, so that a search skips whole years and months that
cannot match and never walks days one by one.

A month's matching days depend only on its length and the weekday of its first day (28
shapes), and a year's on whether it is a leap year and the weekday of 1 January (14 shapes):
a compiled expression holds at most 14 year masks of 366 bits, each built from 12 month
masks. Days are numbered from 1970-01-01 (day 0), as in domain/compiled_zone.py.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import date

from cronlog.domain.cron import CronFields

EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
FIRST_YEAR = 1969
LAST_YEAR = 2101
# Each year's first day number and shape (leap, cron weekday of 1 January).
YEAR_STARTS: dict[int, int] = {
    year: date(year, 1, 1).toordinal() - EPOCH_ORDINAL for year in range(FIRST_YEAR, LAST_YEAR + 2)}
YEAR_SHAPES: dict[int, tuple[bool, int]] = {
    year: (calendar.isleap(year), (date(year, 1, 1).weekday() + 1) % 7)
    for year in range(FIRST_YEAR, LAST_YEAR + 1)}

MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def day_number(d: date) -> int:
    return d.toordinal() - EPOCH_ORDINAL


def date_of(day: int) -> date:
    return date.fromordinal(day + EPOCH_ORDINAL)


@dataclass(frozen=True)
class CompiledCron:
    fields: CronFields
    _year_masks: dict[tuple[bool, int], int] = field(default_factory=dict, init=False,
                                                     repr=False, compare=False, hash=False)

    def year_mask(self, year: int) -> int:
        """The year's matching days as bits (bit k: day k of the year, from 0); 0 for a year
        outside FIRST_YEAR..LAST_YEAR."""
        shape = YEAR_SHAPES.get(year)
        if shape is None:
            return 0
        mask = self._year_masks.get(shape)
        if mask is None:
            mask = self._build_year_mask(*shape)
            self._year_masks[shape] = mask
        return mask

    def _build_year_mask(self, leap: bool, first_weekday: int) -> int:
        mask = 0
        start = 0
        months = self.fields.months
        for month in range(1, 13):
            length = MONTH_DAYS[month - 1] + (1 if leap and month == 2 else 0)
            if month in months:
                mask |= self.fields.days.month_mask(length, (first_weekday + start) % 7) << start
            start += length
        return mask

    def day_gaps(self, first: int, last: int) -> tuple[int | None, int]:
        """The first matching day from `first` on (None: none up to `last`), and the
        longest wait from `first` to a matching day or between two of them up to `last`:
        one step per year."""
        first_found: int | None = None
        previous = first - 1
        longest = 0
        year = date_of(first).year
        while year <= LAST_YEAR and YEAR_STARTS[year] <= last:
            start = YEAR_STARTS[year]
            mask = self.year_mask(year)
            low = max(first - start, 0)
            mask >>= low
            if mask:
                head = start + low + (mask & -mask).bit_length() - 1
                if head <= last:
                    if first_found is None:
                        first_found = head
                    longest = max(longest, head - previous)
                    tail = start + low + mask.bit_length() - 1
                    previous = min(tail, last)
                    # Within a year no wait is longer than the year itself.
            year += 1
        return first_found, longest

    # -- times of day, in seconds from local midnight ---------------------------------
    def first_time_from(self, second: int) -> int | None:
        """The first matching time of day at or after `second` (0-86400), or None."""
        fields = self.fields
        hours, minutes, seconds = fields.hours, fields.minutes, fields.seconds
        hour, rest = divmod(second, 3600)
        minute, sec = divmod(rest, 60)
        i = bisect_left(hours, hour)
        if i < len(hours) and hours[i] == hour:
            j = bisect_left(minutes, minute)
            if j < len(minutes) and minutes[j] == minute:
                k = bisect_left(seconds, sec)
                if k < len(seconds):
                    return hour * 3600 + minute * 60 + seconds[k]
                j += 1
            if j < len(minutes):
                return hour * 3600 + minutes[j] * 60 + seconds[0]
            i += 1
        if i < len(hours):
            return hours[i] * 3600 + minutes[0] * 60 + seconds[0]
        return None

    def last_time_before(self, second: int) -> int | None:
        """The last matching time of day before `second` (0-86400), or None."""
        if second <= 0:
            return None
        fields = self.fields
        hours, minutes, seconds = fields.hours, fields.minutes, fields.seconds
        hour, rest = divmod(second - 1, 3600)
        minute, sec = divmod(rest, 60)
        i = bisect_right(hours, hour) - 1
        if i >= 0 and hours[i] == hour:
            j = bisect_right(minutes, minute) - 1
            if j >= 0 and minutes[j] == minute:
                k = bisect_right(seconds, sec) - 1
                if k >= 0:
                    return hour * 3600 + minute * 60 + seconds[k]
                j -= 1
            if j >= 0:
                return hour * 3600 + minutes[j] * 60 + seconds[-1]
            i -= 1
        if i >= 0:
            return hours[i] * 3600 + minutes[-1] * 60 + seconds[-1]
        return None
