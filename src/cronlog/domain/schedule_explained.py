"""Fire times explained: each with its local wall time and UTC offset, and a note where a
DST change moved, merged or removed fire times (invariant 7 made visible), plus the
schedule in words. Pure: the caller passes the fire times and the instant they follow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronlog.domain.missed_fire_times import offset_changes
from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    FireTime,
    IntervalSchedule,
    Schedule,
)
from cronlog.domain.schedule_words import describe_cron, describe_interval

_SECOND = timedelta(seconds=1)
# Times of a job named one by one in a note about a gap; more are counted.
_MOST_NAMED = 3


@dataclass(frozen=True)
class ExplainedFireTime:
    fire_time: FireTime
    local_time: datetime  # naive: the wall clock in the job's zone
    utc_offset: timedelta
    note: str  # empty when DST did nothing to this fire time


@dataclass(frozen=True)
class ExplainedSchedule:
    description: str
    fire_times: tuple[ExplainedFireTime, ...]


def explain(schedule: Schedule, zone: ZoneInfo, after: datetime,
            fire_times: Sequence[FireTime], description: str) -> ExplainedSchedule:
    notes: dict[FireTime, list[str]] = {t: [] for t in fire_times}
    if fire_times:
        inner = schedule.inner if isinstance(schedule, BoundedSchedule) else schedule
        for change in offset_changes(zone, after.astimezone(UTC), fire_times[-1] + _SECOND):
            _note_change(inner, zone, change, fire_times, notes)
    explained = []
    for t in fire_times:
        local = t.astimezone(zone)
        offset = local.utcoffset()
        assert offset is not None  # a ZoneInfo always has one
        explained.append(ExplainedFireTime(t, local.replace(tzinfo=None), offset,
                                           "; ".join(notes[t])))
    return ExplainedSchedule(description, tuple(explained))


def describe(schedule: Schedule, zone_name: str) -> str:
    inner = schedule.inner if isinstance(schedule, BoundedSchedule) else schedule
    if isinstance(inner, CronSchedule):
        return describe_cron(inner.fields.expression, zone_name)
    if isinstance(inner, IntervalSchedule):
        start = inner.phase if isinstance(schedule, BoundedSchedule) and \
            schedule.start_at is not None else None
        return describe_interval(inner.every, start, zone_name)
    return f"{zone_name}"


def _offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def _clock(local: datetime) -> str:
    return local.strftime("%H:%M:%S" if local.second else "%H:%M")


def _note_change(schedule: Schedule, zone: ZoneInfo, change: datetime,
                 fire_times: Sequence[FireTime], notes: dict[FireTime, list[str]]) -> None:
    before, after = _offset(change - _SECOND, zone), _offset(change, zone)
    if after > before:
        _note_gap(schedule, change, before, after, fire_times, notes)
    else:
        _note_repeat(schedule, zone, change, before, after, fire_times, notes)


def _note_gap(schedule: Schedule, change: datetime, before: timedelta, after: timedelta,
              fire_times: Sequence[FireTime], notes: dict[FireTime, list[str]]) -> None:
    """Clocks went forward: the local times [gap_start, gap_end) do not exist."""
    gap_start = (change + before).replace(tzinfo=None)
    gap_end = (change + after).replace(tzinfo=None)
    whole_minutes = gap_start.second == 0 and gap_end.second == 0
    last = gap_end - (timedelta(minutes=1) if whole_minutes else _SECOND)
    span = f"{_clock(gap_start)}-{_clock(last)}"
    day = gap_start.date().isoformat()
    following = next((t for t in fire_times if t >= change), None)
    if following is None:
        return
    if not isinstance(schedule, CronSchedule):
        notes[following].append(f"{span} do not exist on {day} (the clocks went forward); "
                                "elapsed time is unchanged")
        return
    missing = _matching_local_times(schedule, gap_start, gap_end)
    if not missing:
        return
    names = [_clock(m) for m in missing[:_MOST_NAMED]]
    if len(missing) > _MOST_NAMED:
        names.append(f"{len(missing) - _MOST_NAMED} more")
    named = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb = "does" if len(missing) == 1 else "do"
    if schedule.fields.follows_elapsed_time:
        notes[following].append(
            f"{span} do not exist on {day} (the clocks went forward): {named} of this job "
            "did not fire (it follows elapsed time)")
        return
    if following != change:
        return  # a fixed job's gap times fire at the gap's end, which is in the list
    merged = (" together with its own " + _clock(gap_end)
              if _matches(schedule, gap_end) else "")
    notes[following].append(f"{named} {verb} not exist on {day}; fires at {_clock(gap_end)}"
                            f"{merged} (fixed job)")


def _note_repeat(schedule: Schedule, zone: ZoneInfo, change: datetime, before: timedelta,
                 after: timedelta, fire_times: Sequence[FireTime],
                 notes: dict[FireTime, list[str]]) -> None:
    """Clocks went back: the local times [change + after, change + before) occur twice."""
    shift = before - after
    fixed = isinstance(schedule, CronSchedule) and not schedule.fields.follows_elapsed_time
    for t in fire_times:
        if not change - shift <= t < change + shift:
            continue
        local = t.astimezone(zone)
        day = local.date().isoformat()
        when = _clock(local.replace(tzinfo=None))
        if fixed:
            notes[t].append(f"{when} occurs twice on {day} (the clocks went back); fires once, "
                            "at the first (fixed job)")
        elif t < change:
            notes[t].append(f"the first {when} on {day}; it occurs again after the clocks go "
                            "back")
        else:
            notes[t].append(f"the second {when} on {day}, after the clocks went back")


def _matches(schedule: CronSchedule, local: datetime) -> bool:
    fields = schedule.fields
    return (fields.matches_date(local.date()) and local.hour in fields.hours
            and local.minute in fields.minutes and local.second in fields.seconds)


def _matching_local_times(schedule: CronSchedule, start: datetime,
                          end: datetime) -> list[datetime]:
    """The job's local times in [start, end), a gap of at most a few hours."""
    fields = schedule.fields
    found: list[datetime] = []
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    while day < end:
        if fields.matches_date(day.date()):
            for hour in fields.hours:
                if not start - timedelta(hours=1) < day.replace(hour=hour) < end:
                    continue
                for minute in fields.minutes:
                    for second in fields.seconds:
                        local = day.replace(hour=hour, minute=minute, second=second)
                        if start <= local < end:
                            found.append(local)
        day += timedelta(days=1)
    return found
