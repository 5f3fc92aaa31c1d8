"""cronsim as an oracle for invariant 7, and what to make of it where it slips.

cronsim mimics Debian cron: a 5-field job whose minute and hour fields both do not start
with `*` walks naive local time (a gap time moves to the first minute after the gap, a
repeated one is read at its first occurrence), any other walks real time. It slips in a few
places, each listed in ORACLE_SLIPS with the test that pins an example. A difference is
excused only when it is one of those and a literal reading of invariant 7 (literal_next,
which takes its field matching from cronsim, not from cronlog) agrees with cronlog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

MINUTE = timedelta(minutes=1)
# The literal reading walks minute by minute; differences are rare, and their fire times
# lie within days of the transition the test starts near.
LITERAL_HORIZON = timedelta(days=120)


def oracle_times(expression: str, zone: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    it = CronSim(expression, after.astimezone(zone))
    return [next(it).astimezone(UTC) for _ in range(count)]


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def literal_next(expression: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    """The next fire time of a 5-field job after `after`, by invariant 7 read literally over
    every real minute: a job whose minute or hour field starts with `*` fires at each minute
    whose wall time matches; a fixed one at a matching wall time's first occurrence, and at
    the first minute after a gap for the matching wall times inside it."""
    sim = CronSim(expression, datetime(2026, 1, 1))
    minute_text, hour_text = expression.split()[:2]
    elapsed = minute_text.startswith("*") or hour_text.startswith("*")

    def matches(wall: datetime) -> bool:
        return (wall.month in sim.months and sim.match_day(wall.date())
                and wall.hour in sim.hours and wall.minute in sim.minutes)

    instant = after.replace(second=0, microsecond=0) + MINUTE
    end = after + LITERAL_HORIZON
    while instant < end:
        local = instant.astimezone(zone)
        wall = local.replace(tzinfo=None)
        if matches(wall) and (elapsed or local.fold == 0):
            return instant
        if not elapsed:
            gap_minute = _wall(instant - MINUTE, zone) + MINUTE
            while gap_minute < wall:
                if matches(gap_minute):
                    return instant
                gap_minute += MINUTE
        instant += MINUTE
    return None


def _offset_changes(zone: ZoneInfo, low: datetime, high: datetime) -> list[datetime]:
    """The first instants (whole minutes) of each new offset in (low, high]."""
    changes = []
    hour = timedelta(hours=1)
    cursor = low.replace(second=0, microsecond=0)
    while cursor < high:
        if (cursor + hour).astimezone(zone).utcoffset() != cursor.astimezone(zone).utcoffset():
            probe = cursor
            while probe.astimezone(zone).utcoffset() == cursor.astimezone(zone).utcoffset():
                probe += MINUTE
            changes.append(probe)
        cursor += hour
    return changes


@dataclass(frozen=True)
class OracleSlip:
    name: str
    pinned_by: str  # the unit test that pins an example, with its reasoning
    applies: Callable[[ZoneInfo, datetime, datetime, datetime], bool]


def _goes_backwards(zone: ZoneInfo, previous: datetime, ours: datetime, theirs: datetime) -> bool:
    return theirs <= previous


def _change_off_the_hour(zone: ZoneInfo, previous: datetime, ours: datetime,
                         theirs: datetime) -> bool:
    """A change of less than an hour (Lord Howe's 30 minutes), or one at a wall time that is
    not on the hour (Chatham's 02:45 / 03:45)."""
    for change in _offset_changes(zone, previous - timedelta(days=1), max(ours, theirs)):
        before = (change - MINUTE).astimezone(zone).utcoffset()
        after = change.astimezone(zone).utcoffset()
        assert before is not None and after is not None
        wall_before, wall_after = _wall(change - MINUTE, zone) + MINUTE, _wall(change, zone)
        if abs(after - before) % timedelta(hours=1) or wall_before.minute or wall_after.minute:
            return True
    return False


def _midnight_gap(zone: ZoneInfo, previous: datetime, ours: datetime, theirs: datetime) -> bool:
    for change in _offset_changes(zone, previous - timedelta(days=1), max(ours, theirs)):
        before, after = _wall(change - MINUTE, zone), _wall(change, zone)
        if after > before + MINUTE and after.time().hour == 1 and before.time().hour == 23:
            return True
    return False


ORACLE_SLIPS = (
    OracleSlip("goes backwards: from inside a repeated hour cronsim answers a fixed job's first "
               "occurrence, earlier than the start, or the same instant again",
               "test_slip_cronsim_answers_before_its_start, "
               "test_slip_cronsim_repeats_an_instant", _goes_backwards),
    OracleSlip("change off the hour: cronsim steps hours as 3600 s of real time from the top "
               "of the local hour, so across a 30-minute change (Lord Howe) it lands on :30, "
               "and across a change at :45 (Chatham) past the repeated :45-:59; it misses "
               "wall times that exist",
               "test_slip_cronsim_steps_hours_off_the_hour_after_a_half_hour_change, "
               "test_slip_cronsim_steps_over_a_repeated_part_hour", _change_off_the_hour),
    OracleSlip("midnight gap: cronsim starts a day at its local 00:00, which a midnight gap "
               "(Havana, Santiago) makes imaginary; read at the old offset it is 01:00, so an "
               "elapsed-time job fires at 01:00 for 00:00, or its next hour is 02:00",
               "test_slip_cronsim_reads_an_imaginary_midnight_as_one_o_clock, "
               "test_slip_cronsim_loses_the_hour_after_an_imaginary_midnight", _midnight_gap),
)


def known_slip(zone: ZoneInfo, previous: datetime, ours: datetime,
               theirs: datetime) -> OracleSlip | None:
    for slip in ORACLE_SLIPS:
        if slip.applies(zone, previous, ours, theirs):
            return slip
    return None
