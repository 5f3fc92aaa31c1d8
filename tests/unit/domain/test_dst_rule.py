"""Invariant 7's classification, Debian cron's MIN_STAR / HR_STAR test: which jobs are fixed
and which follow elapsed time across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronlog.domain.cron import parse_cron
from cronlog.domain.schedule import CronSchedule, preview


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
        ) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(("expr", "elapsed"), [
    ("30 2 * * *", False),
    ("0 0-6/3 * * *", False),   # a step, but the field does not start with `*`
    ("0-59/15 2 * * *", False),
    ("5,35 1,2 * * *", False),
    ("*/15 2 * * *", True),     # the minute field starts with `*`
    ("0 * * * *", True),
    ("0 */2 * * *", True),
    ("* 2 * * *", True),
    ("@hourly", True),
    ("@daily", False),
    ("@weekly", False),
    # Seconds first: fixed when second, minute and hour all do not start with `*`.
    ("0 30 2 * * *", False),
    ("0-59/10 30 2 * * *", False),
    ("*/10 30 2 * * *", True),
    ("0 */5 2 * * *", True),
    ("0 30 * * * *", True),
])
def test_fixed_or_elapsed_by_the_first_character_of_each_time_field(expr: str,
                                                                    elapsed: bool) -> None:
    assert parse_cron(expr).follows_elapsed_time is elapsed


def test_six_field_jobs_keep_the_rule() -> None:
    # New York, 8 March 2026: 02:00 -05:00 -> 03:00 -04:00. 02:30:00 fixed fires at the
    # gap's end; with seconds */30 it follows elapsed time and skips the day.
    assert preview(CronSchedule.parse("0 30 2 * * *", "America/New_York"),
                   utc(2026, 3, 7, 12), 2) == [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]
    assert preview(CronSchedule.parse("*/30 30 2 * * *", "America/New_York"),
                   utc(2026, 3, 7, 12), 2) == [utc(2026, 3, 9, 6, 30), utc(2026, 3, 9, 6, 30, 30)]


def test_a_minute_wildcard_with_a_fixed_hour_follows_elapsed_time() -> None:
    # The old rule looked at the hour alone. Sydney, 4 October 2026: 02:00 +10:00 -> 03:00
    # +11:00. `*/15 2` never fires that day (Debian): next at 02:00 +11:00 on 4 October 2027;
    # `0,15,30,45 2` fires once, at 03:00.
    assert preview(CronSchedule.parse("*/15 2 4 10 *", "Australia/Sydney"),
                   utc(2026, 10, 3), 1) == [utc(2027, 10, 3, 15)]
    assert preview(CronSchedule.parse("0,15,30,45 2 4 10 *", "Australia/Sydney"),
                   utc(2026, 10, 3), 2) == [utc(2026, 10, 3, 16), utc(2027, 10, 3, 15)]
