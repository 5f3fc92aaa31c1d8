"""The cost of finding a next fire time (issue 33, invariant 12), on the domain functions
alone: the issue's worst-case inputs and adversarial schedules, each next fire time timed
on its own. Not part of `make bench`:

    .venv/bin/python -m cronlog_dev.bench.schedule_search

Prints each case's worst and median microseconds per next fire time; docs/benchmarks.md,
"Schedule search (issue 33)", has the figures.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from cronlog.domain.compiled_zone import compiled_zone
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import DateRange, ExcludingSchedule, Exclusions
from cronlog.domain.schedule import CronSchedule, Schedule, preview
from cronlog.domain.spec import JobSpec, validate_spec

BOMB = "0 0 " + ",".join(f"{d}W" for d in range(1, 32)) + " * */7,5#5"
NEW_YORK = "America/New_York"
START = datetime(2026, 1, 5, tzinfo=UTC)


def _fridays() -> Exclusions:
    days = (date(2026, 1, 1) + timedelta(days=n) for n in range(27_000))
    return Exclusions(tuple(DateRange(d, d) for d in days if d <= date(2099, 12, 31)
                            and d.weekday() == 4 and d.day >= 29)).normalised()


def _train(first: date, every: int, length: int, count: int) -> Exclusions:
    return Exclusions(tuple(
        DateRange(first + timedelta(days=n * every), first + timedelta(days=n * every + length))
        for n in range(count))).normalised()


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e6


def _case(name: str, schedule: Schedule, afters: list[datetime]) -> float:
    times = []
    for after in afters:
        start = time.perf_counter()
        schedule.next_fire_after(after)
        times.append((time.perf_counter() - start) * 1e6)
    print(f"{name:<62} worst {max(times):8.1f} µs  median {statistics.median(times):7.1f} µs")
    return max(times)


def main() -> int:
    afters = [START + timedelta(hours=7 * n + n % 5) for n in range(2000)]
    for zone in (NEW_YORK, "Europe/Berlin", "UTC", "Asia/Gaza"):
        start = time.perf_counter()
        compiled_zone(ZoneInfo(zone))
        compiling = (time.perf_counter() - start) * 1e6
        print(f"compiling zone {zone:<47} {compiling / 1000:8.1f} ms (once per zone)")
    fridays = _fridays()
    bomb = CronSchedule.parse(BOMB, NEW_YORK)
    bombed = ExcludingSchedule(bomb, fridays, ZoneInfo(NEW_YORK))
    first = _timed(lambda: bombed.next_fire_after(START))
    print(f"{'the bomb, first search (year masks of the calendar built)':<62} {first:14.1f} µs")
    worst = [_case(f"the bomb: {BOMB[:20]}… with {len(fridays.ranges)} Fridays", bombed,
                   afters)]
    worst.append(_case("the bomb's expression alone", bomb, afters))
    for expression in ("0 12 * * 1-6", "*/5 2 * * *", "* * 2 * * *", "30 2 * 3 0#2",
                       "0 0 L 2 *", "59 23 31 12 *", "15,45 */3 LW * 5L"):
        schedule = CronSchedule.parse(expression, NEW_YORK)
        worst.append(_case(f"{expression} (New York)", schedule, afters))
        for label, excluded in (
                ("1,000 weekly ranges Mon-Sat", _train(date(2026, 1, 5), 7, 5, 1000)),
                ("1,000 single days every 27 days", _train(date(2026, 1, 5), 27, 0, 1000))):
            worst.append(_case(f"{expression} + {label}",
                               ExcludingSchedule(schedule, excluded, ZoneInfo(NEW_YORK)), afters))
    # An interval's grid on excluded day after excluded day: a step per range met, the most
    # the bound lets a search take (more is refused at the door).
    from cronlog.domain.schedule import IntervalSchedule
    grid = IntervalSchedule.checked(timedelta(days=2), START + timedelta(hours=12))
    for zone in ("UTC", NEW_YORK):
        on_grid = _train(START.date(), 2, 0, 63)
        worst.append(_case(f"every 2 days, 63 of its fire days excluded ({zone})",
                           ExcludingSchedule(grid, on_grid, ZoneInfo(zone)), [START]))
    never = "0 0 30 2 *"
    refused = []
    for _ in range(2):
        start = time.perf_counter()
        try:
            validate_spec(JobSpec(name="n", tenant="t", queue="q", handler="h", cron=never))
        except InvalidSpec:
            refused.append((time.perf_counter() - start) * 1e6)
    print(f"{'refusing ' + never + ' (first, then remembered)':<62} {refused[0]:8.1f} µs, "
          f"{refused[1]:.1f} µs")
    excluded = _train(date(2026, 1, 5), 2, 0, 541)
    daily = ExcludingSchedule(CronSchedule.parse("0 9 * * *", NEW_YORK), excluded,
                              ZoneInfo(NEW_YORK))
    start = time.perf_counter()
    count = len(preview(daily, START, 1000))
    print(f"{'a preview of 1,000 counts with 541 exclusions':<62} "
          f"{(time.perf_counter() - start) * 1000:8.1f} ms ({count} times)")
    print(f"worst next fire time over every case: {max(worst):.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
