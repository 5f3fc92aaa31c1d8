"""Excluded days (issue 20, calendars; Quartz's calendars are the anchor).

An excluded fire time is not a fire time: it is neither run nor recorded as missed, as 31
February is neither. Exclusions are whole local days in the job's zone: a fire time is
excluded when its wall-clock date there falls in an excluded range. A job names them inline
(spec.exclusions) or through a named calendar that several jobs share (domain/calendar.py).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from uuid import UUID, uuid5
from zoneinfo import ZoneInfo

from cronlog.domain import schedule_search
from cronlog.domain.bounds import BEFORE_EARLIEST, EARLIEST_INSTANT, END_OF_TIME
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    FireTime,
    Schedule,
    local_instants,
)
from cronlog.domain.schedule_search import CompiledExclusions

MAX_EXCLUSION_RANGES = 1000
# The accepted range of instants (domain/bounds.py) in whole local days.
FIRST_DAY = date(1970, 1, 1)
LAST_DAY = date(2099, 12, 31)
_RANGE_SEPARATOR = ".."
# "YYYY-MM-DD..YYYY-MM-DD" is 22 characters: longer text is refused before parsing it.
_MAX_TEXT_CHARS = 22
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

# Calendars are named like queues; the id derives from the tenant and the name, so a
# calendar routes to a partition like a job and no tenant can name another's (invariant 10).
CALENDAR_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")
MAX_DESCRIPTION_CHARS = 1000
# Fixed: changing it would change the id, and the partition, of every calendar.
CALENDAR_NAMESPACE = UUID("9a4e7c1d-2b5f-4f8a-b3c6-1d7e9f0a2c44")


@dataclass(frozen=True, order=True)
class DateRange:
    """Local days first..last, both included."""

    first: date
    last: date

    def text(self) -> str:
        if self.first == self.last:
            return self.first.isoformat()
        return f"{self.first.isoformat()}{_RANGE_SEPARATOR}{self.last.isoformat()}"


def _merged(ranges: Iterable[DateRange]) -> tuple[DateRange, ...]:
    merged: list[DateRange] = []
    # Sorted by a plain key: comparing the dataclasses themselves costs a tuple each time.
    for r in sorted(ranges, key=lambda r: (r.first, r.last)):
        if merged and r.first <= merged[-1].last + timedelta(days=1):
            if r.last > merged[-1].last:
                merged[-1] = DateRange(merged[-1].first, r.last)
        else:
            merged.append(r)
    return tuple(merged)


def _parse_day(text: str, field: str, entry: str) -> date:
    if not _DATE.fullmatch(text):
        raise InvalidSpec(field, f"{entry!r} is not a date YYYY-MM-DD or a range "
                                 "YYYY-MM-DD..YYYY-MM-DD")
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise InvalidSpec(field, f"{entry!r}: {text} is not a date") from exc


@dataclass(frozen=True)
class Exclusions:
    """Excluded local days. Built as given; `normalised()` (what validate_exclusions
    returns, and what every stored spec and calendar holds) is sorted, with overlapping
    and adjacent ranges merged."""

    ranges: tuple[DateRange, ...] = ()
    _sorted: tuple[DateRange, ...] | None = field(default=None, init=False, repr=False,
                                                  compare=False, hash=False)
    _compiled: CompiledExclusions | None = field(default=None, init=False, repr=False,
                                                 compare=False, hash=False)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def _normal(self) -> tuple[DateRange, ...]:
        if self._sorted is None:
            object.__setattr__(self, "_sorted", _merged(self.ranges))
        assert self._sorted is not None
        return self._sorted

    def normalised(self) -> Exclusions:
        normal = self._normal()
        if normal is self.ranges:
            return self
        result = Exclusions(normal)
        object.__setattr__(result, "_sorted", normal)
        return result

    def compiled(self) -> CompiledExclusions:
        """The merged ranges as day numbers and year masks for the search
        (domain/schedule_search.py), built once per value: one step per range."""
        if self._compiled is None:
            object.__setattr__(self, "_compiled", CompiledExclusions(
                (r.first, r.last) for r in self._normal()))
        assert self._compiled is not None
        return self._compiled

    def range_of(self, day: date) -> DateRange | None:
        """The merged excluded range that holds `day`, if any."""
        ranges = self._normal()
        index = bisect_right(ranges, DateRange(day, date.max)) - 1
        if index >= 0 and ranges[index].first <= day <= ranges[index].last:
            return ranges[index]
        return None

    def excludes(self, day: date) -> bool:
        return self.range_of(day) is not None

    def union(self, other: Exclusions) -> Exclusions:
        return Exclusions(_merged((*self.ranges, *other.ranges)))

    def texts(self) -> list[str]:
        return [r.text() for r in self.ranges]

    @classmethod
    def parse(cls, texts: Iterable[str], field: str) -> Exclusions:
        """Exclusions from their text form ("YYYY-MM-DD" or "YYYY-MM-DD..YYYY-MM-DD", as the
        CLI and the proto give them), validated and normalised."""
        ranges: list[DateRange] = []
        for entry in texts:
            if len(ranges) >= MAX_EXCLUSION_RANGES:
                raise InvalidSpec(field, f"at most {MAX_EXCLUSION_RANGES} dates or ranges")
            if len(entry) > _MAX_TEXT_CHARS:
                raise InvalidSpec(field, f"{entry[:40]!r} is not a date YYYY-MM-DD or a range "
                                         "YYYY-MM-DD..YYYY-MM-DD")
            first_text, separator, last_text = entry.partition(_RANGE_SEPARATOR)
            first = _parse_day(first_text, field, entry)
            last = _parse_day(last_text, field, entry) if separator else first
            ranges.append(DateRange(first, last))
        return validate_exclusions(cls(tuple(ranges)), field)


NO_EXCLUSIONS = Exclusions()


def validate_exclusions(value: Exclusions, field: str) -> Exclusions:
    """The exclusions, normalised, if there are at most MAX_EXCLUSION_RANGES ranges (as
    given, before merging) each within 1970-01-01..2099-12-31 and in order; InvalidSpec
    naming the field otherwise."""
    if len(value.ranges) > MAX_EXCLUSION_RANGES:
        raise InvalidSpec(field, f"at most {MAX_EXCLUSION_RANGES} dates or ranges, got "
                                 f"{len(value.ranges)}")
    for r in value.ranges:
        if not (isinstance(r, DateRange) and isinstance(r.first, date)
                and isinstance(r.last, date)):
            raise InvalidSpec(field, "each exclusion is a range of two dates")
        if r.first > r.last:
            raise InvalidSpec(field, f"{r.first.isoformat()}..{r.last.isoformat()}: the "
                                     "first day is after the last")
        if r.first < FIRST_DAY or r.last > LAST_DAY:
            raise InvalidSpec(field, f"{r.text()}: days must be between "
                                     f"{FIRST_DAY.isoformat()} and {LAST_DAY.isoformat()}")
    return value.normalised()


def first_instant_of(day: date, zone: ZoneInfo) -> datetime:
    """The instant from which the zone's wall-clock date is `day` or later for good. Where
    midnight falls in a gap, the end of the gap; where it occurs twice because the previous
    day's last hour repeats (Santiago falls back from 00:00 to 23:00), its second
    occurrence, after which no instant of the previous day follows."""
    midnight = datetime(day.year, day.month, day.day)
    # Both occurrences of a repeated midnight; else the one instant, or the gap's end.
    instants = local_instants(midnight, zone, True) or local_instants(midnight, zone, False)
    for instant, later in pairwise(instants):
        if (later - timedelta(microseconds=1)).astimezone(zone).date() >= day:
            return instant
    return instants[-1]


@dataclass(frozen=True)
class ExcludingSchedule:
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
        inner = self.inner
        bounded = inner if isinstance(inner, BoundedSchedule) else None
        cron = bounded.inner if bounded is not None else inner
        if isinstance(cron, CronSchedule) and cron.zone == self.zone:
            return self._next_cron(cron, bounded, after)
        return self._next_stepping(after)

    def _next_cron(self, cron: CronSchedule, bounded: BoundedSchedule | None,
                   after: datetime) -> FireTime | None:
        """One compiled search over the cron expression with the excluded days masked out
        (schedule_search.next_fire, at most BOUND_TEXT); the bounds apply around it, as
        BoundedSchedule would inside, which gives the same fire times."""
        start_at = bounded.start_at if bounded is not None else None
        end_at = bounded.end_at if bounded is not None else None
        if start_at is not None and after < start_at:
            if start_at >= END_OF_TIME:
                return None
            after = (start_at - timedelta(microseconds=1) if start_at > EARLIEST_INSTANT
                     else BEFORE_EARLIEST)
        found = cron.next_fire_excluding(after, self.exclusions.compiled())
        if found is None or (end_at is not None and found > end_at):
            return None
        return found

    def _next_stepping(self, after: datetime) -> FireTime | None:
        """Any other schedule (an interval, a one-off): one search of the inner schedule
        per excluded range met, each a day step of the search's budget: an interval whose
        grid falls on excluded day after excluded day (every other day excluded, every two
        days) would otherwise cost a step for each of up to 2,000 ranges, 20 ms. Past the
        bound, ScheduleTooCostly, as for a cron expression."""
        budget = schedule_search.SearchBudget()
        cursor = after
        while (candidate := self.inner.next_fire_after(cursor)) is not None:
            excluded = self.exclusions.range_of(candidate.astimezone(self.zone).date())
            if excluded is None:
                return candidate
            budget.day()
            if excluded.last >= LAST_DAY:
                return None  # excluded to the end of the accepted range
            resume = first_instant_of(excluded.last + timedelta(days=1), self.zone)
            # Fire times at the first instant of the day after count: search from just
            # before it. The search always moves forward, even where a zone's rules bend.
            cursor = max(resume.astimezone(UTC) - timedelta(microseconds=1), candidate)
        return None


@dataclass(frozen=True)
class AppliedCalendar:
    """The named calendar a job follows, as its owner last heard of it: its version and
    exclusions, or found=False when no such calendar exists for the job's tenant (the job
    then fires as if it named none)."""

    name: str
    version: int = 0
    found: bool = True
    exclusions: Exclusions = NO_EXCLUSIONS

    @property
    def effective(self) -> Exclusions:
        return self.exclusions if self.found else NO_EXCLUSIONS

    def supersedes(self, held: AppliedCalendar | None) -> bool:
        """Whether a job holding `held` applies this one: another calendar, or a newer
        version of the same (publications are idempotent and may be redelivered; a
        calendar's versions only grow). At the same version, "not found" from the
        calendar's owner replaces a snapshot that had none (version 0)."""
        if held is None or held.name != self.name or self.version > held.version:
            return True
        return self.version == held.version == 0 and self.found != held.found


def named_calendar(name: str | None,
                   snapshot: AppliedCalendar | None) -> AppliedCalendar | None:
    """What a job naming `name` starts from: the api's snapshot when it is of that
    calendar, else "not found" at version 0, until the calendar's owner publishes to it."""
    if name is None:
        return None
    if snapshot is not None and snapshot.name == name:
        return snapshot
    return AppliedCalendar(name, 0, False)


def newest(held: AppliedCalendar | None,
           offered: AppliedCalendar | None) -> AppliedCalendar | None:
    """The calendar a job follows when offered one while holding another."""
    if offered is None or offered.supersedes(held):
        return offered
    return held


def excluded_by(calendar: AppliedCalendar | None) -> Exclusions:
    return calendar.effective if calendar is not None else NO_EXCLUSIONS


def recompute_from(last_fired_at: datetime | None, next_fire_at: datetime | None,
                   at: datetime) -> datetime:
    """Where a job's next fire time is searched from when its exclusions change at `at`:
    from now, so that a day no longer excluded does not bring back fire times that have
    passed; but from just before a fire time that is due or overdue already, so that it is
    still run or recorded if it is not excluded now (invariant 5); never before the last
    fire time the job has fired (its runs exist, ahead of time within the lookahead)."""
    base = at
    if next_fire_at is not None and next_fire_at <= at:
        base = next_fire_at - timedelta(microseconds=1)
    return max(base, last_fired_at) if last_fired_at is not None else base


def validate_calendar_name(name: str, field: str) -> str:
    if not name:
        raise InvalidSpec(field, "a calendar name must not be empty")
    if not CALENDAR_NAME_PATTERN.fullmatch(name):
        raise InvalidSpec(field, f"calendar name {name[:40]!r} must match "
                                 f"{CALENDAR_NAME_PATTERN.pattern}")
    return name


def validate_description(description: str, field: str = "description") -> str:
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidSpec(field, f"at most {MAX_DESCRIPTION_CHARS} characters, got "
                                 f"{len(description)}")
    return description


def calendar_id(tenant: str, name: str) -> UUID:
    return uuid5(CALENDAR_NAMESPACE, f"{tenant}/{name}")
