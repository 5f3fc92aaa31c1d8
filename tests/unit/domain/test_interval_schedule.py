"""Interval schedules (issue 20): every N of elapsed time on a grid through start_at, or
through the Unix epoch without it; bounds on the interval; overdue ranges counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.missed_fire_times import count_fire_times, overdue_range
from cronlog.domain.schedule import (
    BoundedSchedule,
    IntervalSchedule,
    iter_fire_times,
    preview,
)
from cronlog.domain.spec import JobSpec, validate_spec

START = datetime(2027, 3, 14, 5, 17, 3, tzinfo=UTC)
NINETY = timedelta(minutes=90)


def _spec(**changes: object) -> JobSpec:
    base = {"name": "rate", "tenant": "acme", "queue": "default", "handler": "echo",
            "every": NINETY, "time_zone": "America/New_York"}
    return JobSpec(**{**base, **changes})  # type: ignore[arg-type]


def test_fire_times_are_start_at_plus_whole_intervals() -> None:
    schedule = validate_spec(_spec(start_at=START)).schedule()
    times = preview(schedule, START - timedelta(days=3), 4)
    assert times == [START + k * NINETY for k in range(4)]
    # Strictly after: a fire time asked from itself gives the next one.
    assert schedule.next_fire_after(START + NINETY) == START + 2 * NINETY
    assert schedule.next_fire_after(START + NINETY - timedelta(microseconds=1)) == START + NINETY


def test_without_start_at_the_grid_runs_from_the_unix_epoch() -> None:
    schedule = validate_spec(_spec()).schedule()
    after = datetime(2027, 3, 14, 4, 59, tzinfo=UTC)
    # 90-minute steps from 1970-01-01T00:00Z land on 00:00, 01:30, 03:00, 04:30, 06:00 UTC.
    assert preview(schedule, after, 2) == [datetime(2027, 3, 14, 6, tzinfo=UTC),
                                           datetime(2027, 3, 14, 7, 30, tzinfo=UTC)]


def test_dst_changes_do_not_move_an_interval() -> None:
    # New York springs forward at 2027-03-14T07:00Z: the spacing stays 90 minutes of real time.
    times = preview(IntervalSchedule.checked(NINETY, None),
                    datetime(2027, 3, 14, tzinfo=UTC), 8)
    assert {b - a for a, b in pairwise(times)} == {NINETY}


def test_end_at_bounds_an_interval() -> None:
    end = START + 2 * NINETY
    schedule = validate_spec(_spec(start_at=START, end_at=end)).schedule()
    assert list(iter_fire_times(schedule, START - timedelta(seconds=1))) == [
        START, START + NINETY, end]


@pytest.mark.parametrize(("every", "message"), [
    (timedelta(milliseconds=999), "between 1s and 366 days"),
    (timedelta(0), "between 1s and 366 days"),
    (timedelta(seconds=-5), "between 1s and 366 days"),
    (timedelta(days=366, seconds=1), "between 1s and 366 days"),
    (timedelta(seconds=1, microseconds=500), "whole number of milliseconds"),
])
def test_an_interval_out_of_bounds_is_refused_naming_the_field(every: timedelta,
                                                                message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as refused:
        validate_spec(_spec(every=every))
    assert refused.value.field == "spec.schedule.every"


def test_the_bounds_themselves_are_accepted() -> None:
    assert validate_spec(_spec(every=timedelta(seconds=1))).every == timedelta(seconds=1)
    assert validate_spec(_spec(every=timedelta(days=366))).every == timedelta(days=366)


@pytest.mark.parametrize("other", [{"cron": "* * * * *"},
                                   {"at": datetime(2030, 1, 1, tzinfo=UTC)}])
def test_an_interval_is_one_kind_of_schedule_only(other: dict[str, object]) -> None:
    with pytest.raises(InvalidSpec, match="not several") as refused:
        validate_spec(_spec(**other))
    assert refused.value.field == "spec.schedule"


def test_with_start_at_the_first_fire_time_is_start_at_itself() -> None:
    # So an interval job always fires within its bounds: end_at must follow start_at.
    spec = validate_spec(_spec(start_at=START, end_at=START + timedelta(seconds=1)))
    assert preview(spec.schedule(), START - timedelta(days=400), 5) == [START]


def test_nothing_is_answered_past_the_end_of_the_range() -> None:
    schedule = IntervalSchedule.checked(timedelta(days=366), datetime(2099, 6, 1, tzinfo=UTC))
    assert schedule.next_fire_after(datetime(2099, 6, 1, tzinfo=UTC)) is None
    assert schedule.next_fire_after(datetime(9000, 1, 1, tzinfo=UTC)) is None


def test_overdue_ranges_of_an_interval_are_counted_by_division() -> None:
    schedule = IntervalSchedule.checked(timedelta(seconds=1), START)
    first = START + timedelta(seconds=10)
    boundary = first + timedelta(days=30, microseconds=1)
    span = overdue_range(schedule, first, boundary)
    # 30 days of an every-second job: far more than stepping's budget, counted exactly.
    assert (span.count, span.last, span.complete) == (30 * 86_400 + 1,
                                                     first + timedelta(days=30), True)


def test_interval_counting_matches_stepping() -> None:
    schedule = BoundedSchedule(IntervalSchedule.checked(timedelta(seconds=7), START), START,
                               START + timedelta(hours=1))
    lo, hi = START - timedelta(minutes=5), START + timedelta(minutes=90)
    stepped = sum(1 for t in iter_fire_times(schedule, lo - timedelta(microseconds=1))
                  if t < hi)
    assert count_fire_times(schedule, lo, hi, max_steps=10) == stepped
