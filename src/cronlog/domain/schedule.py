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

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
from cronlog.domain.compiled_cron import CompiledCron
from cronlog.domain.compiled_zone import compiled_zone, instant_of, seconds_of
from cronlog.domain.cron import CronFields, parse_cron
from cronlog.domain.errors import InvalidSpec, ScheduleTooCostly
from cronlog.domain.schedule_search import (
    BOUND_TEXT,
    HORIZON_YEARS,
    CompiledExclusions,
    SearchPlan,
    next_fire,
    plan_for,
)

FireTime = datetime  # an aware UTC instant at which a job is due



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
    """A cron expression in a zone. Its next fire time comes from the compiled search
    (domain/schedule_search.py): at most MOST_DAYS day steps and MOST_YEAR_STEPS year steps
    (BOUND_TEXT), under 1 ms, whatever the expression; the reference search it must agree
    with is kept in tests/unit/domain/reference_search.py."""

    fields: CronFields
    zone: ZoneInfo
    # next_fire_after is a pure function of the schedule and `after`, and schedules are
    # shared by expression and zone (_parse_cached): the many jobs of one expression fire
    # at the same instants and ask the same question, answered once. Emptied when full.
    _answers: dict[datetime, FireTime | None] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False)
    _plans: list[SearchPlan] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False)

    @classmethod
    def parse(cls, expression: str, time_zone: str, field: str = "spec.schedule.cron",
              zone_field: str = "spec.time_zone") -> CronSchedule:
        """The schedule, or InvalidSpec naming the field; refusals are remembered as answers
        are (at most REMEMBERED_REFUSALS), so a refused expression costs one search."""
        key = (expression, time_zone, field, zone_field)
        refused = _refusals.get(key)
        if refused is not None:
            raise refused[0](refused[1], refused[2])
        try:
            return _parse_cached(expression, time_zone, field, zone_field)
        except InvalidSpec as exc:
            if len(_refusals) >= REMEMBERED_REFUSALS:
                _refusals.pop(next(iter(_refusals)))
            _refusals[key] = (type(exc), exc.field, exc.message)
            raise

    @property
    def plan(self) -> SearchPlan:
        """The expression compiled for this zone, built on first use."""
        if not self._plans:
            self._plans.append(plan_for(CompiledCron(self.fields), compiled_zone(self.zone),
                                        self.fields.follows_elapsed_time))
        return self._plans[0]

    def admitted(self, field: str = "spec.schedule.cron") -> CronSchedule:
        """The schedule if its matching days never wait longer than the search's horizon
        (about 8 years) anywhere in the accepted range, so that a search from any instant
        finds its next fire time; ScheduleTooCostly naming the field otherwise. Stored
        jobs are not asked: their searches stay bounded all the same."""
        if not self.plan.admitted:
            raise ScheduleTooCostly(field, f"{self.fields.expression!r} can wait more than "
                                           f"{HORIZON_YEARS} years between fire times: the "
                                           "search for its next fire time would give up "
                                           f"({BOUND_TEXT})")
        return self

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
        answer = self.next_fire_excluding(start, None)
        if len(answers) >= REMEMBERED_ANSWERS:
            answers.clear()
        answers[start] = answer
        return answer

    def next_fire_excluding(self, after: datetime,
                            excluded: CompiledExclusions | None) -> FireTime | None:
        """The first fire time after `after` not on an excluded local day (as
        exclusions.ExcludingSchedule defines it), in at most BOUND_TEXT."""
        start = _clamped(after)
        if start is None:
            return None
        found = next_fire(self.plan, excluded, seconds_of(start))
        return _in_range_or_none(instant_of(found)) if found is not None else None


REMEMBERED_REFUSALS = 4096
_refusals: dict[tuple[str, str, str, str], tuple[type[InvalidSpec], str, str]] = {}


@lru_cache(maxsize=4096)
def _parse_cached(expression: str, time_zone: str, field: str,
                  zone_field: str) -> CronSchedule:
    """Jobs are rebuilt from their rows every time they are due; parsing their schedule
    (and probing that it ever fires) once per expression and zone is enough."""
    schedule = CronSchedule(parse_cron(expression, field), zone_named(time_zone, zone_field))
    # One search from the start of the range: an expression with no fire time within the
    # horizon from there is refused, as it always was.
    try:
        first = schedule.next_fire_after(BEFORE_EARLIEST)
    except ScheduleTooCostly as exc:
        raise ScheduleTooCostly(field, exc.message) from exc
    if first is None:
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
