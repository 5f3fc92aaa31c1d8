"""Which dates a cron expression's two day fields name.

Vixie cron's rule (Debian's cron, and cronsim after it): when both day-of-month and
day-of-week are restricted — neither field's text starts with `*` — a date matching
either one is enough; otherwise both must match (a `*` field matches every date, a `*/2`
one only its own days). Restriction is read off the text, as Debian's DOM_STAR / DOW_STAR
flags are: `1-31` is restricted, `*/1` is not.

Beside plain values, the Quartz terms (each a term of its field's comma list):
- day-of-month `L`: the month's last day; `LW`: its last weekday (Monday-Friday);
  `15W`: the weekday nearest the 15th within the same month (a Saturday moves to the
  Friday before, a Sunday to the Monday after, but never out of the month: `1W` on a
  Saturday is Monday the 3rd). A day the month does not have (`31W` in April) names no
  date that month, as `31` does not.
- day-of-week `5L`: the month's last Friday; `1#2`: its second Monday (`#1`-`#5`; a fifth
  Monday that a month lacks names no date). Weekdays are cron's: 0 or 7 Sunday, or names.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

from cronlog.domain.errors import InvalidSpec

WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_NEAREST_WEEKDAY = re.compile(r"(\d{1,2})w")
_LAST_OF_WEEKDAY = re.compile(r"([a-z]{3}|\d)l")
_NTH_WEEKDAY = re.compile(r"([a-z]{3}|\d)#(\d)")
_LETTERS = re.compile(r"[a-z]+")


def _has_quartz_mark(term: str, names: tuple[str, ...]) -> bool:
    """Whether `term` holds an L, W or # outside a weekday or month name (wed, jul)."""
    return "#" in term or any(("l" in run or "w" in run) and run not in names
                              for run in _LETTERS.findall(term))


@dataclass(frozen=True)
class DayOfMonthTerms:
    """The Quartz terms of a day-of-month field, and what is left for plain parsing."""

    plain: str | None  # the plain terms, comma-joined; None when there are none
    last_day: bool = False
    last_weekday: bool = False
    nearest_weekdays: tuple[int, ...] = ()


@dataclass(frozen=True)
class DayOfWeekTerms:
    plain: str | None
    last_of_weekdays: tuple[int, ...] = ()  # 0 = Sunday
    nth_weekdays: tuple[tuple[int, int], ...] = ()  # (weekday, n)


def _weekday(text: str, field: str, term: str) -> int:
    if text.isdigit():
        value = int(text)
        if value > 7:
            raise InvalidSpec(field, f"day-of-week term {term!r}: a weekday is 0-7 (0 and 7 are "
                                     "Sunday) or a name such as fri")
        return value % 7
    if text in WEEKDAY_NAMES:
        return WEEKDAY_NAMES.index(text)
    raise InvalidSpec(field, f"day-of-week term {term!r}: {text!r} is not a weekday")


def split_day_of_month(text: str, field: str) -> DayOfMonthTerms:
    plain: list[str] = []
    last_day = last_weekday = False
    nearest: set[int] = set()
    for term in text.lower().split(","):
        if term == "l":
            last_day = True
        elif term == "lw":
            last_weekday = True
        elif match := _NEAREST_WEEKDAY.fullmatch(term):
            day = int(match.group(1))
            if not 1 <= day <= 31:
                raise InvalidSpec(field, f"day-of-month term {term!r}: W follows a day 1-31, "
                                         "as in 15W")
            nearest.add(day)
        elif _has_quartz_mark(term, ()):
            raise InvalidSpec(field, f"day-of-month term {term!r} is not valid: the Quartz terms "
                                     "there are L (last day), LW (last weekday) and a day with "
                                     "W (15W, the weekday nearest the 15th), each on its own")
        else:
            plain.append(term)
    return DayOfMonthTerms(",".join(plain) if plain else None, last_day, last_weekday,
                           tuple(sorted(nearest)))


def split_day_of_week(text: str, field: str) -> DayOfWeekTerms:
    plain: list[str] = []
    last_of: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for term in text.lower().split(","):
        if match := _LAST_OF_WEEKDAY.fullmatch(term):
            last_of.add(_weekday(match.group(1), field, term))
        elif match := _NTH_WEEKDAY.fullmatch(term):
            n = int(match.group(2))
            if not 1 <= n <= 5:
                raise InvalidSpec(field, f"day-of-week term {term!r}: # is followed by 1-5 "
                                         "(1#2 is the second Monday)")
            nth.add((_weekday(match.group(1), field, term), n))
        elif _has_quartz_mark(term, WEEKDAY_NAMES):
            raise InvalidSpec(field, f"day-of-week term {term!r} is not valid: the Quartz terms "
                                     "there are a weekday with L (5L, the last Friday) and "
                                     "weekday#n (1#2, the second Monday), each on its own")
        else:
            plain.append(term)
    return DayOfWeekTerms(",".join(plain) if plain else None, tuple(sorted(last_of)),
                          tuple(sorted(nth)))


def misplaced_quartz_term(text: str) -> bool:
    """Whether a field other than the two day fields holds an L, W or #."""
    return _has_quartz_mark(text.lower(), MONTH_NAMES)


def nearest_weekday(year: int, month: int, day: int) -> int | None:
    """The day of the month that `dayW` names, or None when the month is shorter."""
    last = calendar.monthrange(year, month)[1]
    if day > last:
        return None
    weekday = calendar.weekday(year, month, day)  # Monday = 0
    if weekday == 5:
        return day - 1 if day > 1 else day + 2
    if weekday == 6:
        return day + 1 if day < last else day - 2
    return day


def last_weekday_of_month(year: int, month: int) -> int:
    last = calendar.monthrange(year, month)[1]
    weekday = calendar.weekday(year, month, last)
    return last - max(0, weekday - 4)


@dataclass(frozen=True)
class DayRule:
    days: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday, as in cron
    day_of_month: DayOfMonthTerms
    day_of_week: DayOfWeekTerms
    # Vixie cron: both fields restricted, so either one matching is enough.
    either: bool

    def matches(self, d: date) -> bool:
        if self.either:
            return self._day_matches(d) or self._weekday_matches(d)
        return self._day_matches(d) and self._weekday_matches(d)

    def _day_matches(self, d: date) -> bool:
        if d.day in self.days:
            return True
        terms = self.day_of_month
        if terms.last_day and d.day == calendar.monthrange(d.year, d.month)[1]:
            return True
        if terms.last_weekday and d.day == last_weekday_of_month(d.year, d.month):
            return True
        return any(nearest_weekday(d.year, d.month, n) == d.day for n in terms.nearest_weekdays)

    def _weekday_matches(self, d: date) -> bool:
        weekday = (d.weekday() + 1) % 7
        if weekday in self.weekdays:
            return True
        terms = self.day_of_week
        if weekday in terms.last_of_weekdays and (
                d.day + 7 > calendar.monthrange(d.year, d.month)[1]):
            return True
        nth = (d.day - 1) // 7 + 1
        return (weekday, nth) in terms.nth_weekdays

    def month_mask(self, length: int, first_weekday: int) -> int:
        """The days of a month that match, as bits (bit d - 1 for day d), for a month of
        `length` days whose first day is cron weekday `first_weekday` (0 = Sunday): what
        matches() answers for each of its days, in at most a few hundred operations. A
        month's days depend on nothing else, so a schedule has at most 28 such masks."""
        if self.either:
            return self._day_mask(length, first_weekday) | self._weekday_mask(length,
                                                                              first_weekday)
        return self._day_mask(length, first_weekday) & self._weekday_mask(length, first_weekday)

    def _day_mask(self, length: int, first_weekday: int) -> int:
        mask = 0
        for day in self.days:
            if day <= length:
                mask |= 1 << (day - 1)
        terms = self.day_of_month
        last_weekday = (first_weekday + length - 1) % 7  # cron's: 0 Sunday, 6 Saturday
        if terms.last_day:
            mask |= 1 << (length - 1)
        if terms.last_weekday:
            mask |= 1 << (length - 1 - {6: 1, 0: 2}.get(last_weekday, 0))
        for n in terms.nearest_weekdays:
            if n > length:
                continue
            weekday = (first_weekday + n - 1) % 7
            if weekday == 6:  # Saturday
                nearest = n - 1 if n > 1 else n + 2
            elif weekday == 0:  # Sunday
                nearest = n + 1 if n < length else n - 2
            else:
                nearest = n
            mask |= 1 << (nearest - 1)
        return mask

    def _weekday_mask(self, length: int, first_weekday: int) -> int:
        mask = 0
        terms = self.day_of_week
        for day in range(1, length + 1):
            weekday = (first_weekday + day - 1) % 7
            if (weekday in self.weekdays
                    or (weekday in terms.last_of_weekdays and day + 7 > length)
                    or (weekday, (day - 1) // 7 + 1) in terms.nth_weekdays):
                mask |= 1 << (day - 1)
        return mask
