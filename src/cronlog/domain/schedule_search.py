"""The next fire time of a cron schedule, with or without excluded days, in bounded work
(issue 33; DESIGN invariant 12).

The search is the one domain/schedule.py always described (invariant 7, its reference in
tests/unit/domain/reference_search.py), made cheap:
- days come from the compiled expression's year masks (domain/compiled_cron.py): a year
  with no matching day costs one step, never 365;
- excluded days are masked out of those years (year masks of the exclusions), so a
  matching day on an excluded range is skipped with the whole range, not searched and
  refused one by one; only days next to an offset change that bends local days (a gap or a
  repeated span across midnight, or a gap that holds all of an elapsed-time job's times)
  are looked at one by one, as the reference search does;
- a matching day's first time after the cursor is found by bisection over the day's
  stretches of one UTC offset (domain/compiled_zone.py), not by asking zoneinfo about each
  local time.

The bound, counted as the search goes: at most MOST_DAYS day steps (a matching day looked
at, or a jump past an excluded range) of at most ~15 µs each, and at most MOST_YEAR_STEPS
year steps (a year's masks) of at most ~2 µs each: under 1 ms per next fire time on the
benchmark machine (docs/benchmarks.md). Past it the search raises ScheduleTooCostly: the
api refuses such a schedule, and the owner sets aside a job whose search hits it
(invariant 9); it never searches on. Within the bound, a search looks SEARCH_DAYS (about 8
years) ahead of its cursor, as the reference does: a schedule whose matching days leave a
longer wait anywhere in the accepted range is refused at the door (admitted()).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from cronlog.domain.compiled_cron import (
    LAST_YEAR,
    YEAR_STARTS,
    CompiledCron,
    date_of,
    day_number,
)
from cronlog.domain.compiled_zone import DAY, CompiledZone, seconds_of
from cronlog.domain.errors import ScheduleTooCostly

# A matching day is searched for this many days from the cursor's local date (less one);
# none later is found (the reference search's horizon since issue 20).
SEARCH_DAYS = 366 * 8 + 2
HORIZON_YEARS = 8
# The longest wait between matching days an accepted expression may have: a search from
# any instant finds the next one inside its horizon.
LONGEST_WAIT_DAYS = SEARCH_DAYS - 3
# The bound (invariant 12). A search from an accepted schedule needs at most 3 days at its
# start, one per offset change in its horizon for an elapsed-time job whose times a gap
# swallows (2 a year in most zones: 18), and 2 per excluded range it meets next to such a
# change; 64 leaves room for zones with 4 changes a year.
MOST_DAYS = 64
MOST_YEAR_STEPS = (HORIZON_YEARS + 2) * (MOST_DAYS + 1)
BOUND_TEXT = (f"at most {MOST_DAYS} day steps and {MOST_YEAR_STEPS} year steps per next "
              "fire time")

# Local days: the last one the reference search looks at (END_OF_TIME's date plus one),
# the last an exclusion may name, and the day searches of the whole range start from.
LAST_SEARCH_DAY = day_number(date(2100, 1, 2))
LAST_EXCLUDED_DAY = day_number(date(2099, 12, 31))
FIRST_SEARCH_DAY = day_number(date(1969, 12, 30))
END_SECONDS = 4_102_444_800  # 2100-01-01T00:00:00Z


class SearchBudget:
    """Counts a search's steps and stops it past the bound."""

    __slots__ = ("days", "years")

    def __init__(self) -> None:
        self.days = 0
        self.years = 0

    def day(self) -> None:
        self.days += 1
        if self.days > MOST_DAYS:
            raise ScheduleTooCostly("spec.schedule", "finding the next fire time would take "
                                                     f"more than {BOUND_TEXT}")

    def year(self) -> None:
        self.years += 1
        if self.years > MOST_YEAR_STEPS:
            raise ScheduleTooCostly("spec.schedule", "finding the next fire time would take "
                                                     f"more than {BOUND_TEXT}")


class CompiledExclusions:
    """Excluded local days (merged, sorted ranges) as day numbers, and as bit masks per year
    built when a search first needs them: at most one step per range and year."""

    def __init__(self, ranges: Iterable[tuple[date, date]]) -> None:
        pairs = [(day_number(first), day_number(last)) for first, last in ranges]
        self.firsts = [first for first, _ in pairs]
        self.lasts = [last for _, last in pairs]
        self._years: dict[int, int] = {}

    def range_last(self, day: int) -> int | None:
        """The last day of the excluded range that holds `day`, or None."""
        index = bisect_right(self.firsts, day) - 1
        if index >= 0 and self.lasts[index] >= day:
            return self.lasts[index]
        return None

    def year_mask(self, year: int) -> int:
        mask = self._years.get(year)
        if mask is None:
            start, end = YEAR_STARTS[year], YEAR_STARTS[year + 1]
            firsts, lasts = self.firsts, self.lasts
            mask = 0
            index = bisect_right(lasts, start - 1)
            while index < len(firsts) and firsts[index] < end:
                low = max(firsts[index], start) - start
                high = min(lasts[index], end - 1) - start
                mask |= ((1 << (high - low + 1)) - 1) << low
                index += 1
            self._years[year] = mask
        return mask


@dataclass(frozen=True)
class SearchPlan:
    """What a search of one expression in one zone needs, built once per parsed schedule."""

    cron: CompiledCron
    zone: CompiledZone
    elapsed: bool
    # Whether the expression's matching days never wait longer than LONGEST_WAIT_DAYS
    # (admitted()); only then are excluded days skipped by the year.
    admitted: bool
    # Days never skipped unseen (see the module docstring).
    near: frozenset[int]
    _near_years: dict[int, int] = field(default_factory=dict, init=False, repr=False,
                                        compare=False, hash=False)

    def near_mask(self, year: int) -> int:
        mask = self._near_years.get(year)
        if mask is None:
            start, end = YEAR_STARTS[year], YEAR_STARTS[year + 1]
            mask = 0
            for day in self.near:
                if start <= day < end:
                    mask |= 1 << (day - start)
            self._near_years[year] = mask
        return mask


def plan_for(cron: CompiledCron, zone: CompiledZone, elapsed: bool) -> SearchPlan:
    _, longest = cron.day_gaps(FIRST_SEARCH_DAY, LAST_SEARCH_DAY)
    near = set(zone.midnight_days)
    if elapsed:
        # Days whose every matching time falls in a gap: they have no fire time, and the
        # search looks at them one by one as the reference does.
        first = cron.first_time_from(0)
        last = cron.last_time_before(DAY)
        for index, change in enumerate(zone.changes):
            before, after = zone.offsets[index], zone.offsets[index + 1]
            if after <= before or first is None or last is None:
                continue
            gap_start, gap_end = change + before, change + after
            day = gap_start // DAY
            if (gap_start - day * DAY <= first and last < gap_end - day * DAY):
                near.update((day - 1, day, day + 1))
    return SearchPlan(cron, zone, elapsed, longest <= LONGEST_WAIT_DAYS, frozenset(near))


def _next_day(plan: SearchPlan, excluded: CompiledExclusions | None, day: int, horizon: int,
              budget: SearchBudget) -> tuple[int | None, int | None]:
    """The first matching day in day..horizon not skipped, and the last day skipped before
    it (a matching day on an excluded range, away from offset changes)."""
    skipped: int | None = None
    if day > horizon:
        return None, None
    year = date_of(day).year
    while year <= LAST_YEAR:
        start = YEAR_STARTS[year]
        if start > horizon:
            break
        budget.year()
        low = max(day - start, 0)
        width = horizon - (start + low) + 1
        mask = (plan.cron.year_mask(year) >> low) & ((1 << width) - 1)
        skippable = 0
        if excluded is not None and mask:
            skip = (excluded.year_mask(year) & ~plan.near_mask(year)) >> low
            skippable = mask & skip
            mask &= ~skip
        if mask:
            offset = (mask & -mask).bit_length() - 1
            skippable &= (1 << offset) - 1
            if skippable:
                skipped = start + low + skippable.bit_length() - 1
            return start + low + offset, skipped
        if skippable:
            skipped = start + low + skippable.bit_length() - 1
        year += 1
    return None, skipped


def _evaluate(plan: SearchPlan, day: int, cursor: int) -> tuple[int | None, bool]:
    """The day's first fire time after `cursor` (all in whole seconds), and whether it is
    settled: whether one of the day's matching local times fires only after the cursor, so
    that no later day can fire earlier (the reference's _first_in_day)."""
    zone, cron = plan.zone, plan.cron
    first, last = zone.stretches(day)
    start = day * DAY
    if first == last:  # one offset all around the day: each local time is one instant
        offset = zone.offsets[first]
        second = cron.first_time_from(max(0, cursor + offset + 1 - start))
        if second is None:
            return None, False
        return start + second - offset, True
    if plan.elapsed:
        return _evaluate_elapsed(plan, day, cursor, first, last)
    return _evaluate_fixed(plan, day, cursor, first, last)


def _evaluate_fixed(plan: SearchPlan, day: int, cursor: int, first: int,
                    last: int) -> tuple[int | None, bool]:
    """A fixed job fires each local time at its first occurrence, and one in a gap at the
    gap's end: its fire time grows with the local time, so the first local time whose fire
    time is after the cursor gives the answer."""
    zone, cron = plan.zone, plan.cron
    start, end = day * DAY, day * DAY + DAY
    covered: int | None = None  # local times before this have had their first occurrence
    for index in range(first, last + 1):
        begins, ends, offset = zone.stretch(index)
        local_from = begins + offset if begins is not None else None
        local_to = ends + offset if ends is not None else None
        if begins is not None and covered is not None and local_from is not None \
                and local_from > covered and begins > cursor:
            gap_from, gap_to = max(covered, start), min(local_from, end)
            if gap_from < gap_to:
                second = cron.first_time_from(gap_from - start)
                if second is not None and start + second < gap_to:
                    return begins, True
        low = start if local_from is None else max(local_from, start)
        if covered is not None:
            low = max(low, covered)
        high = end if local_to is None else min(local_to, end)
        if low < high:
            second = cron.first_time_from(max(low, cursor + offset + 1) - start)
            if second is not None and start + second < high:
                return start + second - offset, True
        if local_to is None:
            break
        covered = local_to if covered is None else max(covered, local_to)
    return None, False


def _evaluate_elapsed(plan: SearchPlan, day: int, cursor: int, first: int,
                      last: int) -> tuple[int | None, bool]:
    """An elapsed-time job fires at every instant whose local time matches: the earliest
    such instant after the cursor over the day's stretches. Settled when the day's last
    matching local time that exists fires only after the cursor (every later local time
    then does too)."""
    zone, cron = plan.zone, plan.cron
    start, end = day * DAY, day * DAY + DAY
    best: int | None = None
    latest: int | None = None
    pieces: list[tuple[int, int, int]] = []
    for index in range(first, last + 1):
        begins, ends, offset = zone.stretch(index)
        low = start if begins is None else max(begins + offset, start)
        high = end if ends is None else min(ends + offset, end)
        if low >= high:
            continue
        pieces.append((low, high, offset))
        second = cron.first_time_from(max(low, cursor + offset + 1) - start)
        if second is not None and start + second < high:
            instant = start + second - offset
            if best is None or instant < best:
                best = instant
        final = cron.last_time_before(high - start)
        if final is not None and start + final >= low and (latest is None
                                                            or start + final > latest):
            latest = start + final
    if latest is None:
        return best, False
    settled = all(latest - offset > cursor for low, high, offset in pieces
                  if low <= latest < high)
    return best, settled


def next_fire(plan: SearchPlan, excluded: CompiledExclusions | None, after: int,
              budget: SearchBudget | None = None) -> int | None:
    """The first fire time strictly after the instant `after` (whole seconds, rounded
    down), not on an excluded local day; None when there is none in the accepted range or
    within the horizon. Raises ScheduleTooCostly past the bound."""
    budget = budget or SearchBudget()
    zone = plan.zone
    cursor = after
    skipping = excluded is not None and plan.admitted
    while True:
        day = zone.local_day(cursor) - 1
        horizon = min(day + SEARCH_DAYS - 1, LAST_SEARCH_DAY)
        best: int | None = None
        jumped = False
        while True:
            found_day, skipped = _next_day(
                plan, excluded if skipping and best is None else None, day, horizon, budget)
            if skipped is not None:
                # The reference finds a fire time on each skipped day and jumps past its
                # excluded range: past the last one, the state is the same.
                assert excluded is not None
                range_last = excluded.range_last(skipped)
                assert range_last is not None
                if range_last >= LAST_EXCLUDED_DAY:
                    return None
                budget.day()
                resume = zone.first_instant_of(range_last + 1) - 1
                if resume > cursor:
                    cursor = resume
                    jumped = True
                    break
                # The cursor is past the range already (its days fire before it): go on
                # after the range, as the reference finds nothing on those days.
                day = range_last + 1
                continue
            if found_day is None:
                break
            budget.day()
            found, settled = _evaluate(plan, found_day, cursor)
            if found is not None and (best is None or found < best):
                best = found
            if settled:
                break
            day = found_day + 1
        if jumped:
            continue
        if best is None or best >= END_SECONDS:
            return None
        if excluded is None:
            return best
        range_last = excluded.range_last(zone.local_day(best))
        if range_last is None:
            return best
        if range_last >= LAST_EXCLUDED_DAY:
            return None
        cursor = max(zone.first_instant_of(range_last + 1) - 1, best)
        budget.day()


__all__ = ["SEARCH_DAYS", "CompiledExclusions", "SearchBudget", "SearchPlan", "next_fire",
           "plan_for", "seconds_of"]
