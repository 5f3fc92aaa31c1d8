"""PreviewSchedule explained (issue 20): wall time, offset, and a note wherever invariant 7
moved, merged or removed a fire time; the schedule in words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    IntervalSchedule,
    Schedule,
    preview,
)
from cronlog.domain.schedule_explained import ExplainedSchedule, describe, explain
from cronlog.domain.schedule_words import describe_cron

NEW_YORK = "America/New_York"
# New York: clocks go forward 2027-03-14 02:00 -> 03:00 (07:00Z), back 2026-11-01 02:00 ->
# 01:00 (06:00Z).
BEFORE_SPRING = datetime(2027, 3, 13, 12, tzinfo=UTC)
BEFORE_FALL = datetime(2026, 10, 31, 12, tzinfo=UTC)


def _explained(schedule: Schedule, after: datetime, count: int,
               zone: str = NEW_YORK) -> ExplainedSchedule:
    return explain(schedule, ZoneInfo(zone), after, preview(schedule, after, count),
                   describe(schedule, zone))


def _notes(explained: ExplainedSchedule) -> list[tuple[str, float, str]]:
    return [(f.local_time.isoformat(), f.utc_offset / timedelta(hours=1), f.note)
            for f in explained.fire_times]


def test_a_fixed_job_in_the_gap_fires_at_its_end_and_says_so() -> None:
    explained = _explained(CronSchedule.parse("30 2 * * *", NEW_YORK), BEFORE_SPRING, 2)
    assert explained.description == "at 02:30 every day, America/New_York"
    assert _notes(explained) == [
        ("2027-03-14T03:00:00", -4,
         "02:30 does not exist on 2027-03-14; fires at 03:00 (fixed job)"),
        ("2027-03-15T02:30:00", -4, ""),
    ]


def test_a_fixed_gap_time_merges_with_the_jobs_own_time_after_the_gap() -> None:
    explained = _explained(CronSchedule.parse("30 2,3 * * *", NEW_YORK), BEFORE_SPRING, 2)
    first, second = explained.fire_times
    assert first.fire_time == datetime(2027, 3, 14, 7, tzinfo=UTC)
    assert first.note == "02:30 does not exist on 2027-03-14; fires at 03:00 (fixed job)"
    assert second.local_time == datetime(2027, 3, 14, 3, 30) and not second.note
    merged = _explained(CronSchedule.parse("0 2,3 * * *", NEW_YORK), BEFORE_SPRING, 1)
    assert merged.fire_times[0].note == ("02:00 does not exist on 2027-03-14; fires at 03:00 "
                                         "together with its own 03:00 (fixed job)")


def test_an_elapsed_time_job_says_which_of_its_times_the_gap_removed() -> None:
    explained = _explained(CronSchedule.parse("*/15 2 * * *", NEW_YORK), BEFORE_SPRING, 1)
    # No 02:xx on 2027-03-14: the next fire time is the next day's 02:00.
    assert explained.fire_times[0].local_time == datetime(2027, 3, 15, 2, 0)
    assert explained.fire_times[0].note == (
        "02:00-02:59 do not exist on 2027-03-14 (the clocks went forward): 02:00, 02:15, "
        "02:30 and 1 more of this job did not fire (it follows elapsed time)")


def test_a_fixed_job_in_the_repeated_hour_fires_once_at_the_first() -> None:
    explained = _explained(CronSchedule.parse("30 1 * * *", NEW_YORK), BEFORE_FALL, 3)
    assert _notes(explained) == [
        ("2026-11-01T01:30:00", -4,
         "01:30 occurs twice on 2026-11-01 (the clocks went back); fires once, at the first "
         "(fixed job)"),
        ("2026-11-02T01:30:00", -5, ""),
        ("2026-11-03T01:30:00", -5, ""),
    ]


def test_an_elapsed_time_job_fires_in_both_occurrences_and_each_is_named() -> None:
    explained = _explained(CronSchedule.parse("*/30 1 * * *", NEW_YORK),
                           datetime(2026, 11, 1, 4, 59, tzinfo=UTC), 4)
    assert [(f.local_time.strftime("%H:%M"), f.note) for f in explained.fire_times] == [
        ("01:00", "the first 01:00 on 2026-11-01; it occurs again after the clocks go back"),
        ("01:30", "the first 01:30 on 2026-11-01; it occurs again after the clocks go back"),
        ("01:00", "the second 01:00 on 2026-11-01, after the clocks went back"),
        ("01:30", "the second 01:30 on 2026-11-01, after the clocks went back"),
    ]
    assert [f.utc_offset for f in explained.fire_times] == [timedelta(hours=-4)] * 2 + [
        timedelta(hours=-5)] * 2


def test_an_interval_notes_the_change_but_keeps_its_spacing() -> None:
    schedule = BoundedSchedule(IntervalSchedule.checked(
        timedelta(minutes=90), datetime(2027, 3, 14, 4, 30, tzinfo=UTC)),
        datetime(2027, 3, 14, 4, 30, tzinfo=UTC))
    explained = _explained(schedule, datetime(2027, 3, 14, tzinfo=UTC), 3)
    assert explained.description == ("every 90 minutes from 2027-03-14T04:30:00Z (elapsed "
                                      "time), shown in America/New_York")
    assert [(f.local_time.strftime("%H:%M"), f.note) for f in explained.fire_times] == [
        ("23:30", ""), ("01:00", ""),
        ("03:30", "02:00-02:59 do not exist on 2027-03-14 (the clocks went forward); elapsed "
                  "time is unchanged")]


def test_a_zone_without_changes_has_no_notes() -> None:
    explained = _explained(CronSchedule.parse("*/10 * * * *", "Asia/Kolkata"), BEFORE_SPRING,
                           50, zone="Asia/Kolkata")
    assert all(not f.note and f.utc_offset == timedelta(hours=5, minutes=30)
               for f in explained.fire_times)


@pytest.mark.parametrize(("expression", "words"), [
    ("30 2 * * 1-5", "at 02:30 on weekdays"),
    ("0 9,17 * * mon-fri", "at 09:00 and 17:00 on weekdays"),
    ("*/15 * * * *", "every 15 minutes"),
    ("*/15 2 * * *", "at 02:00, 02:15, 02:30 and 02:45 every day"),
    ("*/5 9-17 * * *", "every 5 minutes during hours 9-17"),
    ("0 * * * *", "at minute 0 of every hour"),
    ("*/10 * * * * *", "every 10 seconds"),
    ("0 9 * * 1#2", "at 09:00 on the second Monday of the month"),
    ("0 9 * * 5L", "at 09:00 on the last Friday of the month"),
    ("0 9 LW * *", "at 09:00 on the last weekday of the month"),
    ("0 9 15W * *", "at 09:00 on the weekday nearest day 15"),
    ("0 0 1 jan,jul *", "at 00:00 on day 1 of the month in January and July"),
    ("0 0 1,15 * 0", "at 00:00 on days 1,15 of the month or on Sundays"),
    ("@daily", "at 00:00 every day"),
])
def test_expressions_in_words(expression: str, words: str) -> None:
    assert describe_cron(expression, "Europe/Berlin") == f"{words}, Europe/Berlin"
