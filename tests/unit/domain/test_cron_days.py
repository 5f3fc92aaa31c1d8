"""Day fields: Vixie cron's day-of-month / day-of-week rule, and Quartz's L, W and # terms,
bounded and validated like every field and under the same DST rule (invariant 7)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.cron import parse_cron
from cronlog.domain.cron_days import last_weekday_of_month, nearest_weekday
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule import CronSchedule, preview
from tests.support.examples import examples


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
        ) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def days(expr: str, count: int, after: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> list[str]:
    return [t.date().isoformat() for t in preview(CronSchedule.parse(expr, "UTC"), after, count)]


@pytest.mark.parametrize(("expr", "expected"), [
    # L: the month's last day.
    ("0 0 L * *", ["2026-01-31", "2026-02-28", "2026-03-31"]),
    # LW: the last Monday-Friday; 31 January and 28 February 2026 are Saturdays, 31 May a
    # Sunday.
    ("0 0 LW 1,2,3,5 *", ["2026-01-30", "2026-02-27", "2026-03-31", "2026-05-29"]),
    # 15W: 15 January is a Thursday; 15 February and 15 March Sundays (-> Monday 16th); 15
    # August a Saturday (-> Friday 14th).
    ("0 0 15W 1,2,3,8 *", ["2026-01-15", "2026-02-16", "2026-03-16", "2026-08-14"]),
    # 1W never leaves the month: 1 August 2026 is a Saturday -> Monday 3rd; 1 November a
    # Sunday -> Monday 2nd.
    ("0 0 1W 8,11 *", ["2026-08-03", "2026-11-02"]),
    # 31W: 31 May 2026 is a Sunday -> Friday 29th; April has no 31st, so no date.
    ("0 0 31W 4,5 *", ["2026-05-29", "2027-05-31"]),
    # 5L: the last Friday.
    ("0 0 * * 5L", ["2026-01-30", "2026-02-27", "2026-03-27"]),
    ("0 0 * * friL", ["2026-01-30", "2026-02-27", "2026-03-27"]),
    # 1#2: the second Monday; 1#5 only in months with five Mondays.
    ("0 0 * * 1#2", ["2026-01-12", "2026-02-09", "2026-03-09"]),
    ("0 0 * * MON#5", ["2026-03-30", "2026-06-29", "2026-08-31"]),
    # Quartz terms mix with plain ones in a list.
    ("0 0 1,L 1 *", ["2026-01-01", "2026-01-31", "2027-01-01"]),
    ("0 0 * 1 1#1,5L", ["2026-01-05", "2026-01-30", "2027-01-04"]),
    # Both day fields restricted: either one (Vixie), Quartz terms too.
    ("0 0 L 1,2 5L", ["2026-01-30", "2026-01-31", "2026-02-27", "2026-02-28"]),
])
def test_quartz_day_terms(expr: str, expected: list[str]) -> None:
    assert days(expr, len(expected), datetime(2025, 12, 31, 23, 59, tzinfo=UTC)) == expected


def test_day_fields_follow_vixie_cron() -> None:
    # Day-of-month starts with `*`: both must match (odd days that are Mondays); not "any
    # Monday", which is what the dom-is-unrestricted shortcut gave.
    assert days("0 0 */2 * 1", 3) == ["2026-01-05", "2026-01-19", "2026-02-09"]
    # 1-31 does not start with `*`: restricted, so either field matching is enough: every
    # day (croniter reads 1-31 as `*`).
    assert days("0 0 1-31 * 1", 3) == ["2026-01-02", "2026-01-03", "2026-01-04"]
    assert days("0 0 13 * 5", 3, utc(2026, 2, 1)) == ["2026-02-06", "2026-02-13", "2026-02-20"]


def test_a_range_that_starts_where_it_ends_is_one_value() -> None:
    # As in Debian's cron; croniter reads 23-23 as a full wrap-around (every hour).
    assert [t.hour for t in preview(CronSchedule.parse("0 23-23 * * *", "UTC"),
                                    utc(2026, 1, 1), 2)] == [23, 23]
    assert parse_cron("0 0 * * 2-2/3").matches_date(date(2026, 1, 6))  # a Tuesday
    assert not parse_cron("0 0 * * 2-2/3").matches_date(date(2026, 1, 7))


def test_a_star_inside_a_list_is_every_value() -> None:
    assert days("0 0 * * *,1", 2) == ["2026-01-02", "2026-01-03"]


def test_names_in_either_case() -> None:
    assert days("0 0 * JAN FRI", 1) == days("0 0 * jan fri", 1) == ["2026-01-02"]


def test_quartz_terms_keep_the_dst_rule() -> None:
    # New York moves 02:00 -> 03:00 on the second Sunday of March (0#2). A fixed 02:30 fires
    # right after the gap, 03:00 -04:00; */30 follows elapsed time, and since 2007 the second
    # Sunday of March has always been the change day: it never fires.
    assert preview(CronSchedule.parse("30 2 * 3 0#2", "America/New_York"),
                   utc(2026, 3, 1), 1) == [utc(2026, 3, 8, 7)]
    assert CronSchedule.parse("*/30 2 * 3 0#2", "America/New_York").next_fire_after(
        utc(2026, 3, 1)) is None
    # Berlin moves 03:00 -> 02:00 on the last Sunday of October (0L): 02:30 happens at
    # +02:00 and again at +01:00. Fixed: once; elapsed time: both.
    assert preview(CronSchedule.parse("30 2 * 10 0L", "Europe/Berlin"),
                   utc(2026, 10, 1), 2) == [utc(2026, 10, 25, 0, 30), utc(2027, 10, 31, 0, 30)]
    assert preview(CronSchedule.parse("*/30 2 * 10 0L", "Europe/Berlin"), utc(2026, 10, 1), 4) == [
        utc(2026, 10, 25, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1),
        utc(2026, 10, 25, 1, 30)]


@pytest.mark.parametrize(("bad", "says"), [
    ("0 0 32W * *", "1-31"),
    ("0 0 0W * *", "1-31"),
    ("0 0 W * *", "day-of-month term 'w'"),
    ("0 0 L-2 * *", "day-of-month term 'l-2'"),
    ("0 0 15W/2 * *", "day-of-month term '15w/2'"),
    ("0 0 LW-5 * *", "day-of-month term 'lw-5'"),
    ("0 0 1-15W * *", "day-of-month term '1-15w'"),
    ("0 0 * * L", "day-of-week term 'l'"),
    ("0 0 * * 8L", "0-7"),
    ("0 0 * * xyzL", "is not a weekday"),
    ("0 0 * * 1#6", "1-5"),
    ("0 0 * * 1#0", "1-5"),
    ("0 0 * * 1#2/2", "day-of-week term '1#2/2'"),
    ("0 0 * * 1W", "day-of-week term '1w'"),
    ("0 0 1#2 * *", "day-of-month term '1#2'"),
    ("0 0 * L *", "month field"),
    ("0 0 * 1W *", "month field"),
    ("L 0 * * *", "minute field"),
    ("0 5L * * *", "hour field"),
    ("1#2 0 0 * * *", "second field"),
    ("r * * * *", "unsupported syntax"),
    ("H 0 * * *", "unsupported syntax"),
])
def test_bad_quartz_terms_name_the_field_and_what_is_wrong(bad: str, says: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        CronSchedule.parse(bad, "UTC")
    assert caught.value.field == "spec.schedule.cron"
    assert says in str(caught.value)


def test_quartz_terms_are_bounded_like_every_field() -> None:
    # The same 1,024-character bound; a long list of Quartz terms is refused, not expanded.
    with pytest.raises(InvalidSpec):
        CronSchedule.parse("0 0 " + ",".join(["15W"] * 300) + " * *", "UTC")
    # A list within the bound is fine, its duplicates merged.
    fields = parse_cron("0 0 " + ",".join(["15W"] * 200) + " * *")
    assert fields.days.day_of_month.nearest_weekdays == (15,)


def test_w_and_lw_by_brute_force() -> None:
    # Every month of 2026-2029: the nearest weekday is a weekday of the same month, at most
    # two days away, and the named day itself when that is a weekday.
    for year in range(2026, 2030):
        for month in range(1, 13):
            last = last_weekday_of_month(year, month)
            assert date(year, month, last).weekday() < 5
            assert all(date(year, month, d).weekday() >= 5
                       for d in range(last + 1, (date(year + month // 12, month % 12 + 1, 1)
                                                 - timedelta(days=1)).day + 1))
            for day in range(1, 32):
                found = nearest_weekday(year, month, day)
                if found is None:
                    continue
                assert date(year, month, found).weekday() < 5
                assert abs(found - day) <= 2
                if date(year, month, day).weekday() < 5:
                    assert found == day


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(st.integers(0, 7), st.integers(1, 5), st.dates(date(2026, 1, 1), date(2030, 12, 31)))
def test_nth_and_last_weekday_match_their_definitions(weekday: int, n: int, d: date) -> None:
    cron_weekday = (d.weekday() + 1) % 7
    same_weekday_days = [x for x in range(1, 32) if _is(d.year, d.month, x, cron_weekday)]
    nth = parse_cron(f"0 0 * * {weekday}#{n}")
    last = parse_cron(f"0 0 * * {weekday}L")
    assert nth.matches_date(d) == (weekday % 7 == cron_weekday
                                   and same_weekday_days.index(d.day) + 1 == n)
    assert last.matches_date(d) == (weekday % 7 == cron_weekday
                                    and d.day == same_weekday_days[-1])


def _is(year: int, month: int, day: int, cron_weekday: int) -> bool:
    try:
        return (date(year, month, day).weekday() + 1) % 7 == cron_weekday
    except ValueError:
        return False
