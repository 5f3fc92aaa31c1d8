"""Excluded days (issue 20): their text form and bounds, and a schedule without them that
does bounded work whatever the exclusions and the inner schedule."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import (
    MAX_EXCLUSION_RANGES,
    DateRange,
    ExcludingSchedule,
    Exclusions,
    calendar_id,
    validate_calendar_name,
    validate_description,
    validate_exclusions,
)
from cronlog.domain.schedule import CronSchedule, OneOffSchedule, Schedule, preview

UTC_ZONE = ZoneInfo("UTC")


def days(*texts: str) -> Exclusions:
    return Exclusions.parse(texts, "spec.exclusions")


@dataclass
class Counting:
    """A schedule that counts the searches asked of it."""

    inner: Schedule
    calls: list[datetime] = field(default_factory=list)

    def next_fire_after(self, after: datetime) -> datetime | None:
        self.calls.append(after)
        return self.inner.next_fire_after(after)


def test_the_text_form_is_parsed_sorted_and_merged() -> None:
    parsed = days("2026-12-31", "2026-12-24..2026-12-26", "2026-12-27", "2026-12-25")
    assert parsed.ranges == (DateRange(date(2026, 12, 24), date(2026, 12, 27)),
                             DateRange(date(2026, 12, 31), date(2026, 12, 31)))
    assert parsed.texts() == ["2026-12-24..2026-12-27", "2026-12-31"]
    assert days(*parsed.texts()) == parsed


def test_a_day_is_excluded_when_a_range_holds_it() -> None:
    parsed = days("2026-12-24..2026-12-26", "2027-01-01")
    assert [d.day for d in (date(2026, 12, 23) + timedelta(n) for n in range(12))
            if parsed.excludes(d)] == [24, 25, 26, 1]
    assert not Exclusions().excludes(date(2026, 12, 24)) and not Exclusions()


def test_union_merges_both() -> None:
    assert days("2026-01-01").union(days("2026-01-02..2026-01-03")).texts() == [
        "2026-01-01..2026-01-03"]


@pytest.mark.parametrize("text", ["2026-13-01", "2026-02-30", "26-01-01", "2026-01-01..",
                                  "..2026-01-01", "2026-01-01...2026-01-02", "", "x" * 500,
                                  "2026-01-01..2026-01-02..2026-01-03", "\uff12\uff10\uff12\uff16-01-01"])
def test_bad_text_is_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        Exclusions.parse([text], "spec.exclusions")
    assert refused.value.field == "spec.exclusions"


def test_a_range_must_run_forwards_and_stay_within_the_accepted_days() -> None:
    for texts in (["2026-01-02..2026-01-01"], ["1969-12-31"], ["2099-12-31..2100-01-01"]):
        with pytest.raises(InvalidSpec, match=r"calendar\.exclusions"):
            Exclusions.parse(texts, "calendar.exclusions")
    assert days("1970-01-01..2099-12-31").texts() == ["1970-01-01..2099-12-31"]


def test_at_most_a_thousand_ranges_counted_before_merging() -> None:
    same = ["2026-01-01"] * MAX_EXCLUSION_RANGES
    assert days(*same).texts() == ["2026-01-01"]
    with pytest.raises(InvalidSpec, match=f"at most {MAX_EXCLUSION_RANGES}"):
        days(*same, "2026-01-01")
    many = Exclusions((DateRange(date(2026, 1, 1), date(2026, 1, 1)),) * 1001)
    with pytest.raises(InvalidSpec, match=r"spec\.exclusions"):
        validate_exclusions(many, "spec.exclusions")


def test_calendar_ids_are_per_tenant_and_names_are_bounded() -> None:
    assert calendar_id("a", "holidays") == calendar_id("a", "holidays")
    assert calendar_id("a", "holidays") != calendar_id("b", "holidays")
    assert validate_calendar_name("uk-bank.holidays_2027", "name") == "uk-bank.holidays_2027"
    for bad in ("", "a/b", "a b", "x" * 129, "../x/"):
        with pytest.raises(InvalidSpec, match=r"^name"):
            validate_calendar_name(bad, "name")
    with pytest.raises(InvalidSpec, match=r"^description"):
        validate_description("x" * 1001)


def test_a_daily_job_skips_its_excluded_days_in_its_own_zone() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # 00:30 in Berlin is the evening before in UTC: the local date decides.
    schedule = ExcludingSchedule(CronSchedule.parse("30 0 * * *", "Europe/Berlin"),
                                 days("2026-12-24..2026-12-26"), berlin)
    fired = preview(schedule, datetime(2026, 12, 21, 12, tzinfo=UTC), 4)
    assert [t.astimezone(berlin).date().day for t in fired] == [22, 23, 27, 28]
    assert fired[2] == datetime(2026, 12, 26, 23, 30, tzinfo=UTC)


def test_a_fire_time_at_midnight_after_the_range_counts() -> None:
    schedule = ExcludingSchedule(CronSchedule.parse("0 0 * * *", "UTC"), days("2026-03-02"),
                                 UTC_ZONE)
    assert schedule.next_fire_after(datetime(2026, 3, 1, 12, tzinfo=UTC)) == datetime(
        2026, 3, 3, tzinfo=UTC)


def test_a_year_excluded_from_an_every_second_job_is_one_search_not_millions() -> None:
    inner = Counting(CronSchedule.parse("* * * * * *", "UTC"))
    schedule = ExcludingSchedule(inner, days("2027-01-01..2027-12-31"), UTC_ZONE)
    nxt = schedule.next_fire_after(datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC))
    assert nxt == datetime(2028, 1, 1, tzinfo=UTC)
    assert len(inner.calls) == 2


def test_the_work_is_at_most_one_search_per_range() -> None:
    # Every other day excluded for years: a daily job meets 1000 ranges in a row.
    ranges = tuple(DateRange(date(2026, 1, 1) + timedelta(2 * n), date(2026, 1, 1) +
                             timedelta(2 * n)) for n in range(MAX_EXCLUSION_RANGES))
    inner = Counting(CronSchedule.parse("0 12 */2 * *", "UTC"))
    schedule = ExcludingSchedule(inner, validate_exclusions(Exclusions(ranges), "f"),
                                 UTC_ZONE)
    schedule.next_fire_after(datetime(2025, 12, 31, tzinfo=UTC))
    assert len(inner.calls) <= MAX_EXCLUSION_RANGES + 1


def test_excluded_to_the_end_of_the_range_never_fires_again() -> None:
    schedule = ExcludingSchedule(CronSchedule.parse("* * * * *", "UTC"),
                                 days("2030-01-01..2099-12-31"), UTC_ZONE)
    assert schedule.next_fire_after(datetime(2029, 12, 31, 23, 59, tzinfo=UTC)) is None


def test_an_inner_schedule_that_ends_ends_it() -> None:
    one_off = OneOffSchedule(datetime(2026, 5, 1, 9, tzinfo=UTC))
    assert ExcludingSchedule(one_off, days("2026-05-01"), UTC_ZONE).next_fire_after(
        datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert ExcludingSchedule(one_off, days("2026-05-02"), UTC_ZONE).next_fire_after(
        datetime(2026, 1, 1, tzinfo=UTC)) == one_off.at


def test_the_day_after_a_fall_back_at_midnight_starts_when_the_repeated_hour_ends() -> None:
    # Santiago, 2026-04-05 00:00 (-03) falls back to 2026-04-04 23:00 (-04): the hour
    # 23:00-24:00 of the 4th happens twice, and the 5th begins at 04:00Z.
    santiago = ZoneInfo("America/Santiago")
    schedule = ExcludingSchedule(CronSchedule.parse("*/30 * * * *", "America/Santiago"),
                                 days("2026-04-04"), santiago)
    nxt = schedule.next_fire_after(datetime(2026, 4, 4, 12, tzinfo=UTC))
    assert nxt == datetime(2026, 4, 5, 4, 0, tzinfo=UTC)
    assert nxt.astimezone(santiago).replace(tzinfo=None) == datetime(2026, 4, 5, 0, 0)


def test_the_day_after_a_midnight_gap_starts_at_the_end_of_the_gap() -> None:
    # Santiago, 2026-09-06 00:00 (-04) springs forward to 01:00 (-03): the 6th begins at
    # 04:00Z, with 01:00 local.
    santiago = ZoneInfo("America/Santiago")
    fixed = ExcludingSchedule(CronSchedule.parse("30 0 * * *", "America/Santiago"),
                              days("2026-09-05"), santiago)
    # A fixed job's 00:30, which does not exist on the 6th, fires once right after the gap.
    assert fixed.next_fire_after(datetime(2026, 9, 5, 12, tzinfo=UTC)) == datetime(
        2026, 9, 6, 4, 0, tzinfo=UTC)
    hourly = ExcludingSchedule(CronSchedule.parse("0 * * * *", "America/Santiago"),
                               days("2026-09-05"), santiago)
    assert hourly.next_fire_after(datetime(2026, 9, 5, 12, tzinfo=UTC)) == datetime(
        2026, 9, 6, 4, 0, tzinfo=UTC)


@pytest.mark.parametrize("zone", ["America/Santiago", "America/Havana", "Australia/Lord_Howe",
                                  "Pacific/Chatham", "Europe/Berlin", "Asia/Kolkata"])
def test_no_fire_time_on_an_excluded_day_and_none_lost_on_the_others(zone: str) -> None:
    tz = ZoneInfo(zone)
    excluded = days("2026-03-07..2026-03-09", "2026-04-04..2026-04-05", "2026-09-06",
                    "2026-10-03..2026-10-04", "2026-11-01")
    inner = CronSchedule.parse("15 */2 * * *", zone)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    until = datetime(2026, 11, 10, tzinfo=UTC)
    kept = _all(ExcludingSchedule(inner, excluded, tz), start, until)
    expected = [t for t in _all(inner, start, until)
                if not excluded.excludes(t.astimezone(tz).date())]
    assert kept == expected


def _all(schedule: Schedule, start: datetime, until: datetime) -> list[datetime]:
    times = []
    cursor = schedule.next_fire_after(start)
    while cursor is not None and cursor <= until:
        times.append(cursor)
        cursor = schedule.next_fire_after(cursor)
    return times


@pytest.mark.parametrize("zone", ["America/Santiago", "Pacific/Chatham", "Europe/Berlin"])
def test_overdue_fire_times_are_counted_without_the_excluded_ones(zone: str) -> None:
    from cronlog.domain.missed_fire_times import count_fire_times

    tz = ZoneInfo(zone)
    excluded = days("2026-04-04..2026-04-05", "2026-04-07", "2026-09-05..2026-09-06")
    for expression, lo, hi in (("*/10 * * * *", datetime(2026, 4, 3, 7, tzinfo=UTC),
                                datetime(2026, 4, 8, 5, tzinfo=UTC)),
                               ("0 */2 * * *", datetime(2026, 9, 4, tzinfo=UTC),
                                datetime(2026, 9, 8, tzinfo=UTC))):
        schedule = ExcludingSchedule(CronSchedule.parse(expression, zone), excluded, tz)
        stepped = len([t for t in _all(schedule, lo - timedelta(microseconds=1), hi)
                       if t < hi])
        assert count_fire_times(schedule, lo, hi, 2000) == stepped


def test_a_year_excluded_from_an_every_second_job_is_counted_at_once() -> None:
    from cronlog.domain.missed_fire_times import overdue_range

    schedule = ExcludingSchedule(CronSchedule.parse("* * * * * *", "UTC"),
                                 days("2026-01-02..2026-12-31"), UTC_ZONE)
    first = datetime(2026, 1, 1, 23, 59, 58, tzinfo=UTC)
    overdue = overdue_range(schedule, first, datetime(2027, 1, 1, 0, 0, 5, tzinfo=UTC))
    # The first stretch holds the two fire times before the excluded year; the next one,
    # from where the schedule goes on, starts after it.
    assert (overdue.first, overdue.count) == (first, 2)
    assert overdue.last == datetime(2026, 1, 1, 23, 59, 59, tzinfo=UTC)
    assert schedule.next_fire_after(overdue.last) == datetime(2027, 1, 1, tzinfo=UTC)
