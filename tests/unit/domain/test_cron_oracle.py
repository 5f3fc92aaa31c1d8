"""Invariant 7 against an independent oracle: cronsim, which mimics Debian cron.

Random 5-field expressions (Quartz's L, LW, 5L and 1#2 among them, as cronsim reads them) in
twelve zones, from instants within three days of each of their 2026-2027 transitions: the
first fire times of cronlog and cronsim must agree, except where cronsim slips in one of the
explicit ways of ORACLE_SLIPS, and then a literal reading of invariant 7 must agree with
cronlog. Each slip is pinned below by an example, with the wall times and offsets.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule import CronSchedule, preview
from tests.support.examples import examples
from tests.unit.domain.oracle_support import known_slip, literal_next, oracle_times

ZONES = ("America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "America/Santiago",
         "Europe/Dublin", "Asia/Kolkata", "Pacific/Chatham", "America/Havana",
         "Africa/Casablanca", "Australia/Sydney", "America/St_Johns", "UTC")
FIRE_TIMES_COMPARED = 6
NEAR = 3 * 86_400  # seconds either side of a transition


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
        ) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


@cache
def transitions(zone_name: str) -> tuple[datetime, ...]:
    """The zone's offset changes in 2026-2027 (to the hour), or mid-year instants for UTC
    and Kolkata, which have none."""
    zone = ZoneInfo(zone_name)
    changes = []
    cursor = utc(2026, 1, 1)
    while cursor < utc(2028, 1, 1):
        following = cursor + timedelta(hours=1)
        if following.astimezone(zone).utcoffset() != cursor.astimezone(zone).utcoffset():
            changes.append(following)
        cursor = following
    return tuple(changes) or (utc(2026, 3, 29), utc(2026, 10, 25))


def _term(low: int, high: int) -> st.SearchStrategy[str]:
    single = st.integers(low, high).map(str)
    ranged = st.tuples(st.integers(low, high), st.integers(low, high)).map(sorted).map(
        lambda pair: f"{pair[0]}-{pair[1]}")
    stepped = st.tuples(ranged, st.integers(1, max(1, (high - low) // 2))).map(
        lambda pair: f"{pair[0]}/{pair[1]}")
    return st.one_of(single, ranged, stepped)


def _field(low: int, high: int, *quartz: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    listed = st.lists(_term(low, high), min_size=1, max_size=3).map(",".join)
    star_step = st.integers(1, (high - low + 1) // 2).map(lambda n: f"*/{n}")
    return st.one_of(st.just("*"), star_step, listed, *quartz)


weekday = st.integers(0, 7)
expressions = st.tuples(
    _field(0, 59),
    _field(0, 23),
    _field(1, 31, st.sampled_from(["L", "LW"])),
    st.one_of(st.just("*"), _field(1, 12)),
    _field(0, 7, weekday.map(lambda d: f"{d}L"),
           st.tuples(weekday, st.integers(1, 5)).map(lambda p: f"{p[0]}#{p[1]}")),
).map(" ".join)


@st.composite
def starts(draw: st.DrawFn) -> tuple[str, datetime]:
    zone_name = draw(st.sampled_from(ZONES))
    transition = draw(st.sampled_from(transitions(zone_name)))
    return zone_name, transition + timedelta(seconds=draw(st.integers(-NEAR, NEAR)))


@settings(max_examples=examples(3000), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(expressions, starts())
def test_cronlog_agrees_with_the_cronsim_oracle(expression: str,
                                                start: tuple[str, datetime]) -> None:
    zone_name, after = start
    try:
        schedule = CronSchedule.parse(expression, zone_name)
    except InvalidSpec:
        assume(False)  # never fires (31 February); cronsim has no answer either
        raise
    zone = ZoneInfo(zone_name)
    ours = preview(schedule, after, FIRE_TIMES_COMPARED)
    theirs = oracle_times(expression, zone, after, len(ours))
    previous = after
    for mine, oracle in zip(ours, theirs, strict=True):
        if mine != oracle:
            slip = known_slip(zone, previous, mine, oracle)
            assert slip is not None, (
                f"{expression!r} in {zone_name} after {previous.isoformat()}: cronlog "
                f"{mine.isoformat()}, cronsim {oracle.isoformat()}: no known oracle slip")
            assert literal_next(expression, zone, previous) == mine, (
                f"{expression!r} in {zone_name} after {previous.isoformat()}: cronsim slips "
                f"({slip.name}) but invariant 7 read literally does not give cronlog's "
                f"{mine.isoformat()}")
            return  # past the first difference the two sequences are out of step
        previous = mine


# The issue's examples: where the old rule (the hour field alone) differed from Debian's.
def test_the_issues_examples_follow_debian() -> None:
    def first_differing(expr: str, zone: str, after: datetime, index: int) -> datetime:
        return preview(CronSchedule.parse(expr, zone), after, index + 1)[index]

    # */15 starts with `*`: elapsed time, and 02:00-02:59 of 4 October do not exist in
    # Sydney (+10:00 -> +11:00 at 02:00); the next is 02:00 on the 5th (+11:00).
    assert first_differing("*/15 2 1-7 * *", "Australia/Sydney", utc(2026, 10, 2, 19, 45),
                           0) == utc(2026, 10, 4, 15)
    # Elapsed time: 01:00-01:59 of 7 November happen at -02:30 and again at -03:30; the 5th
    # fire time is 01:00 -03:30, the repeated hour's first minute.
    assert first_differing("*/15 1-3 * 10,11 *", "America/St_Johns", utc(2027, 11, 7, 0, 41),
                           4) == utc(2027, 11, 7, 4, 30)
    # 0-6/3 does not start with `*`: fixed; 03:30 of 5 April (+13:45, then +12:45 again)
    # fires once, and the next is 06:30 (+12:45).
    assert first_differing("30 0-6/3 * * 0", "Pacific/Chatham", utc(2026, 4, 2, 14, 14),
                           2) == utc(2026, 4, 4, 17, 45)
    # Fixed: 00:59 of Sunday 6 September does not exist in Santiago (00:00 -04:00 -> 01:00
    # -03:00); it fires right after the gap, 01:00 -03:00.
    assert first_differing("59 0-6/3 10,20 * 0", "America/Santiago", utc(2026, 9, 4, 11, 9),
                           0) == utc(2026, 9, 6, 4)


# Known oracle slips: where cronsim differs and cronlog is right by invariant 7. Each is a
# kind in oracle_support.ORACLE_SLIPS, which the property test above excuses.

def test_slip_cronsim_loses_the_hour_after_an_imaginary_midnight() -> None:
    # The issue's example. Havana, Sunday 8 March 2026: 00:00 -05:00 -> 01:00 -04:00. The
    # job follows elapsed time (*/7); 01:00 -04:00 exists, 05:00Z. cronsim reads the
    # imaginary 00:00 at -05:00 (05:00Z), steps an hour of real time to 02:00 and answers
    # 06:00Z.
    zone, expr, after = ZoneInfo("America/Havana"), "*/7 1-3 1 3 0", utc(2026, 3, 5, 13, 33)
    assert CronSchedule.parse(expr, zone.key).next_fire_after(after) == utc(2026, 3, 8, 5)
    assert oracle_times(expr, zone, after, 1) == [utc(2026, 3, 8, 6)]
    assert literal_next(expr, zone, after) == utc(2026, 3, 8, 5)


def test_slip_cronsim_reads_an_imaginary_midnight_as_one_o_clock() -> None:
    # Santiago, Sunday 5 September 2027 (the first Sunday, 0#1): 00:00 -04:00 -> 01:00
    # -03:00. Minute `*`: elapsed time, hours 0, 2, 4, 6. 00:xx does not exist, 01:xx is not
    # a matching hour; the first is 02:00 -03:00, 05:00Z. cronsim answers 04:00Z, which is
    # 01:00 -03:00: its imaginary 00:00 read at -04:00.
    zone, expr, after = ZoneInfo("America/Santiago"), "* 0-7/2 24-26 * 0#1", utc(2027, 9, 2, 11, 42)
    assert CronSchedule.parse(expr, zone.key).next_fire_after(after) == utc(2027, 9, 5, 5)
    assert oracle_times(expr, zone, after, 1) == [utc(2027, 9, 5, 4)]
    assert literal_next(expr, zone, after) == utc(2027, 9, 5, 5)


def test_slip_cronsim_steps_hours_off_the_hour_after_a_half_hour_change() -> None:
    # Lord Howe, Sunday 4 April 2027: 02:00 +11:00 -> 01:30 +10:30. */15 (elapsed time) at
    # 13:xx that afternoon: 13:00 +10:30 is 02:30Z. cronsim reaches hour 13 by steps of
    # 3600 s from the half-hour shifted clock and answers 13:30 +10:30, 03:00Z.
    zone, expr, after = ZoneInfo("Australia/Lord_Howe"), "*/15 13 * * */4", utc(2027, 4, 3, 7, 28)
    assert CronSchedule.parse(expr, zone.key).next_fire_after(after) == utc(2027, 4, 4, 2, 30)
    assert oracle_times(expr, zone, after, 1) == [utc(2027, 4, 4, 3)]
    assert literal_next(expr, zone, after) == utc(2027, 4, 4, 2, 30)


def test_slip_cronsim_steps_over_a_repeated_part_hour() -> None:
    # Chatham, Sunday 5 April 2026: 03:45 +13:45 -> 02:45 +12:45 at 14:00Z. `* 2` follows
    # elapsed time; from 03:44:58 +13:45 the next minute is 02:45 +12:45, hour 2: 14:00Z.
    # cronsim goes back to 03:00 +13:45 (13:15Z), adds 3600 s, lands on 03:00 +12:45 and
    # answers 02:00 the next day.
    zone, expr, after = ZoneInfo("Pacific/Chatham"), "* 2 * * *", utc(2026, 4, 4, 13, 59, 58)
    assert CronSchedule.parse(expr, zone.key).next_fire_after(after) == utc(2026, 4, 4, 14)
    assert oracle_times(expr, zone, after, 1) == [utc(2026, 4, 5, 13, 15)]
    assert literal_next(expr, zone, after) == utc(2026, 4, 4, 14)


def test_slip_cronsim_answers_before_its_start() -> None:
    # Havana, Sunday 7 November 2027: 01:00 -04:00 -> 00:00 -05:00, so 00:49 happens at
    # 04:49Z and again at 05:49Z. The job is fixed (49-56/20, 8-15/11,0): 00:49 fires once,
    # at 04:49Z. From 05:41Z (00:41 -05:00, the second occurrence) the next is 08:49 -05:00,
    # 13:49Z; cronsim answers 04:49Z, before the start.
    zone, expr = ZoneInfo("America/Havana"), "49-56/20 8-15/11,0 */2 * */2"
    after = utc(2027, 11, 7, 5, 41, 45)
    assert CronSchedule.parse(expr, zone.key).next_fire_after(after) == utc(2027, 11, 7, 13, 49)
    assert oracle_times(expr, zone, after, 1) == [utc(2027, 11, 7, 4, 49)]
    assert literal_next(expr, zone, after) == utc(2027, 11, 7, 13, 49)


def test_slip_cronsim_repeats_an_instant() -> None:
    # Chatham, Sunday 4 April 2027: 03:45 +13:45 -> 02:45 +12:45. */3 is elapsed time, so
    # 03:28 fires twice, 13:43Z (+13:45) and 14:43Z (+12:45), then 03:53 +12:45, 15:08Z
    # (03:53 +13:45 would be past the change). cronsim answers 13:43Z over and over.
    zone, expr = ZoneInfo("Pacific/Chatham"), "28,53-58 */3 13-24/2 * 6-7"
    after = utc(2027, 4, 3, 12, 39, 33)
    assert preview(CronSchedule.parse(expr, zone.key), after, 3) == [
        utc(2027, 4, 3, 13, 43), utc(2027, 4, 3, 14, 43), utc(2027, 4, 3, 15, 8)]
    assert oracle_times(expr, zone, after, 3) == [utc(2027, 4, 3, 13, 43)] * 3
    assert literal_next(expr, zone, utc(2027, 4, 3, 13, 43)) == utc(2027, 4, 3, 14, 43)
