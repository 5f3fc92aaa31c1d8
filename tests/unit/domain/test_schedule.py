"""Invariant 7: fire times in the job's zone, with the DST rules croniter alone lacks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule import BoundedSchedule, CronSchedule, OneOffSchedule, preview
from tests.support.examples import examples
from tests.unit.domain.reference_search import ReferenceCronSchedule


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
        ) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fires(expr: str, zone: str, after: datetime, count: int) -> list[str]:
    return [t.isoformat() for t in preview(CronSchedule.parse(expr, zone), after, count)]


def test_five_field_cron_in_a_zone() -> None:
    assert fires("0 9 * * 1-5", "Europe/Berlin", utc(2026, 1, 2, 12), 2) == [
        "2026-01-05T08:00:00+00:00", "2026-01-06T08:00:00+00:00"]


def test_six_field_cron_has_seconds_first() -> None:
    assert fires("*/2 * * * * *", "Asia/Kolkata", utc(2026, 1, 1, 0, 0, 1), 3) == [
        "2026-01-01T00:00:02+00:00", "2026-01-01T00:00:04+00:00", "2026-01-01T00:00:06+00:00"]
    assert fires("30 15 10 * * *", "UTC", utc(2026, 1, 1), 1) == ["2026-01-01T10:15:30+00:00"]


@pytest.mark.parametrize(("macro", "expected"), [
    ("@hourly", "2026-01-01T01:00:00+00:00"),
    ("@daily", "2026-01-02T00:00:00+00:00"),
    ("@midnight", "2026-01-02T00:00:00+00:00"),
    ("@weekly", "2026-01-04T00:00:00+00:00"),
    ("@monthly", "2026-02-01T00:00:00+00:00"),
    ("@yearly", "2027-01-01T00:00:00+00:00"),
    ("@annually", "2027-01-01T00:00:00+00:00"),
])
def test_macros(macro: str, expected: str) -> None:
    assert fires(macro, "UTC", utc(2026, 1, 1, 0, 0, 1), 1) == [expected]


def test_spring_forward_fixed_time_fires_once_at_the_first_instant_after_the_gap() -> None:
    # 02:30 does not exist in New York on 2026-03-08; the clock jumps 02:00 -> 03:00 EDT.
    assert fires("30 2 * * *", "America/New_York", utc(2026, 3, 7, 12), 3) == [
        "2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00", "2026-03-10T06:30:00+00:00"]


def test_spring_forward_several_times_in_the_gap_fire_once() -> None:
    assert fires("0,15,45 2 * * *", "America/New_York", utc(2026, 3, 8, 5), 2) == [
        "2026-03-08T07:00:00+00:00", "2026-03-09T06:00:00+00:00"]


def test_fall_back_fixed_time_fires_once_at_its_first_occurrence() -> None:
    # 01:30 happens twice in New York on 2026-11-01 (EDT, then EST).
    assert fires("30 1 * * *", "America/New_York", utc(2026, 10, 31, 12), 2) == [
        "2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"]


def test_fall_back_wildcard_hour_follows_elapsed_time_through_both_hours() -> None:
    assert fires("*/30 * * * *", "America/New_York", utc(2026, 11, 1, 4, 45), 5) == [
        "2026-11-01T05:00:00+00:00", "2026-11-01T05:30:00+00:00",
        "2026-11-01T06:00:00+00:00", "2026-11-01T06:30:00+00:00",
        "2026-11-01T07:00:00+00:00"]


def test_spring_forward_wildcard_hour_skips_the_missing_hour() -> None:
    assert fires("0 * * * *", "America/New_York", utc(2026, 3, 8, 5, 30), 3) == [
        "2026-03-08T06:00:00+00:00", "2026-03-08T07:00:00+00:00", "2026-03-08T08:00:00+00:00"]


def test_a_step_is_elapsed_time_only_when_its_field_starts_with_a_star() -> None:
    # Debian's HR_STAR: */1 starts with `*`, so both 01:00 of fall-back day fire (05:00Z EDT,
    # 06:00Z EST); 0-23/1 does not, so the job is fixed and 01:00 fires once.
    assert fires("0 */1 * * *", "America/New_York", utc(2026, 11, 1, 4, 30), 3) == [
        "2026-11-01T05:00:00+00:00", "2026-11-01T06:00:00+00:00", "2026-11-01T07:00:00+00:00"]
    assert fires("0 0-23/1 * * *", "America/New_York", utc(2026, 11, 1, 4, 30), 3) == [
        "2026-11-01T05:00:00+00:00", "2026-11-01T07:00:00+00:00", "2026-11-01T08:00:00+00:00"]


def test_lord_howe_thirty_minute_shift() -> None:
    # Lord Howe moves 02:00 -> 02:30 on 2026-10-04 and 02:00 -> 01:30 on 2026-04-05.
    assert fires("15 2 * * *", "Australia/Lord_Howe", utc(2026, 10, 3), 2) == [
        "2026-10-03T15:30:00+00:00", "2026-10-04T15:15:00+00:00"]
    # Fall back: 01:45 on 5 April happens at +11:00 and again at +10:30; the first counts.
    assert fires("45 1 * * *", "Australia/Lord_Howe", utc(2026, 4, 4), 2) == [
        "2026-04-04T14:45:00+00:00", "2026-04-05T15:15:00+00:00"]
    # 01:30 and 01:45 happen twice (+11:00 at 14:30Z and 14:45Z, +10:30 at 15:00Z and
    # 15:15Z). A fixed job fires them once each; */15 starts with `*` (Debian's MIN_STAR), so
    # that job follows elapsed time and fires both occurrences.
    once = fires("0,15,30,45 1 * * *", "Australia/Lord_Howe", utc(2026, 4, 4, 14, 20), 4)
    assert once == ["2026-04-04T14:30:00+00:00", "2026-04-04T14:45:00+00:00",
                    "2026-04-05T14:30:00+00:00", "2026-04-05T14:45:00+00:00"]
    both = fires("*/15 1 * * *", "Australia/Lord_Howe", utc(2026, 4, 4, 14, 20), 5)
    assert both == ["2026-04-04T14:30:00+00:00", "2026-04-04T14:45:00+00:00",
                    "2026-04-04T15:00:00+00:00", "2026-04-04T15:15:00+00:00",
                    "2026-04-05T14:30:00+00:00"]


def test_day_of_month_or_day_of_week_like_vixie_cron() -> None:
    # The 13th, or any Friday.
    assert fires("0 0 13 * 5", "UTC", utc(2026, 2, 1), 3) == [
        "2026-02-06T00:00:00+00:00", "2026-02-13T00:00:00+00:00", "2026-02-20T00:00:00+00:00"]


def test_schedule_that_never_fires_is_rejected() -> None:
    with pytest.raises(InvalidSpec) as caught:
        CronSchedule.parse("0 0 30 2 *", "UTC")
    assert caught.value.field == "spec.schedule.cron"


@pytest.mark.parametrize("bad", ["", "61 * * * *", "* * *", "@often", "* * * * * * *",
                                 "0 0 ? * *"])
def test_bad_cron_names_the_field(bad: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        CronSchedule.parse(bad, "UTC")
    assert caught.value.field == "spec.schedule.cron"


def test_unknown_zone_names_the_field() -> None:
    with pytest.raises(InvalidSpec) as caught:
        CronSchedule.parse("* * * * *", "Mars/Olympus_Mons")
    assert caught.value.field == "spec.time_zone"


def test_one_off_and_bounds() -> None:
    at = utc(2026, 5, 1, 12)
    assert OneOffSchedule(at).next_fire_after(at - timedelta(seconds=1)) == at
    assert OneOffSchedule(at).next_fire_after(at) is None
    bounded = BoundedSchedule(CronSchedule.parse("0 * * * *", "UTC"), start_at=utc(2026, 1, 1, 5),
                              end_at=utc(2026, 1, 1, 7))
    assert [t.hour for t in preview(bounded, utc(2026, 1, 1), 10)] == [5, 6, 7]


ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata",
         "America/Sao_Paulo", "Pacific/Chatham"]
fields = st.fixed_dictionaries({
    "minute": st.sampled_from(["0", "30", "*/15", "5,45", "*"]),
    "hour": st.sampled_from(["*", "2", "1", "*/2", "0-23/3", "1,2,3"]),
    "dom": st.sampled_from(["*", "1", "15", "*/2"]),
    "dow": st.sampled_from(["*", "0", "1-5"]),
})
instants = st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2030, 1, 1),
                        timezones=st.just(UTC))


@settings(max_examples=examples(150), deadline=None)
@given(fields, st.sampled_from(ZONES), instants)
def test_fire_time_properties(f: dict[str, str], zone_name: str, after: datetime) -> None:
    expr = f"{f['minute']} {f['hour']} {f['dom']} * {f['dow']}"
    schedule = CronSchedule.parse(expr, zone_name)
    zone = ZoneInfo(zone_name)
    times = preview(schedule, after, 40)
    assert times == sorted(set(times)), "strictly increasing, no duplicates"
    assert all(t > after for t in times)
    fixed_hour = not schedule.fields.follows_elapsed_time
    seen_local: set[tuple[object, int, int]] = set()
    for t in times:
        local = t.astimezone(zone)
        wall = local.replace(tzinfo=None)
        matches = (wall.hour in schedule.fields.hours and wall.minute in schedule.fields.minutes
                   and schedule.fields.matches_date(wall.date()))
        if not matches:
            # Only a fixed-hour time that fell into a DST gap may fire off its wall time,
            # and then exactly at the gap's end: the instant before had an earlier offset.
            assert fixed_hour
            before = (t - timedelta(seconds=1)).astimezone(zone)
            assert before.utcoffset() != local.utcoffset()
        if fixed_hour:
            key = (wall.date(), wall.hour, wall.minute)
            assert key not in seen_local, "a fixed local time fires once per day"
            seen_local.add(key)


# Instants near DST changes as well as anywhere: the compiled search (issue 33) must agree
# with the reference's general search everywhere, across offset changes too.
near_changes = st.sampled_from([
    datetime(2026, 3, 8, 6, 59, tzinfo=UTC), datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
    datetime(2026, 3, 29, 0, 59, tzinfo=UTC), datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
    datetime(2026, 4, 4, 14, 45, tzinfo=UTC), datetime(2026, 10, 3, 15, 29, tzinfo=UTC),
]).flatmap(lambda t: st.integers(-50 * 3600, 50 * 3600).map(
    lambda s: t + timedelta(seconds=s)))


@settings(max_examples=examples(300), deadline=None)
@given(fields, st.sampled_from(ZONES), st.one_of(instants, near_changes),
       st.sampled_from(["0", "*/20", "15,45"]))
def test_the_compiled_search_agrees_with_the_reference_general_search(
        f: dict[str, str], zone_name: str, after: datetime, seconds: str) -> None:
    expr = f"{seconds} {f['minute']} {f['hour']} {f['dom']} * {f['dow']}"
    schedule = CronSchedule.parse(expr, zone_name)
    general_search = ReferenceCronSchedule(schedule.fields, schedule.zone)
    cursor = after
    for _ in range(5):
        general = general_search._next_across_offsets(cursor)
        assert schedule.next_fire_after(cursor) == general
        if general is None:
            break
        cursor = general


def test_a_change_late_in_the_fixed_offset_window_is_seen() -> None:
    # Found by the property test above: Lord Howe moves 02:00 -> 02:30 on 2027-10-03, 46.5 h
    # after the fire before it. Offsets read off the UTC wall clock missed the change.
    schedule = CronSchedule.parse("30 2 1 * 0", "Australia/Lord_Howe")
    assert schedule.next_fire_after(utc(2027, 9, 30, 16)) == utc(2027, 10, 2, 15, 30)


@pytest.mark.parametrize("zone_name", ZONES)
def test_the_compiled_search_agrees_hour_by_hour_before_each_change(zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    start = utc(2027, 1, 1)
    changes = [start + timedelta(hours=h) for h in range(24 * 365)
               if (start + timedelta(hours=h)).astimezone(zone).utcoffset()
               != (start + timedelta(hours=h + 1)).astimezone(zone).utcoffset()]
    for expr in ("30 2 * * *", "0 * * * *", "45 1 * * 0"):
        schedule = CronSchedule.parse(expr, zone_name)
        general = ReferenceCronSchedule(schedule.fields, schedule.zone)
        for change in changes:
            for hours_before in range(0, 50, 1):
                after = change - timedelta(hours=hours_before, minutes=7)
                assert schedule.next_fire_after(after) == general._next_across_offsets(after), (
                    expr, after)
