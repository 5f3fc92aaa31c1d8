"""What-if replay (issue 38): a job's real history replayed under a changed spec, in memory.

What carries over from the real history (`HistoryFacts`): when the job existed, its pauses,
the scheduler's real outages as this job saw them (a fire written later than its fire
time: nothing could fire meanwhile), and how long its runs took. Under the proposed spec
each of its fire times in the window is then run on time, run late (after a pause or an
outage, within the catch-up window or under RUN_ALL), recorded missed (the misfire policy),
or meets a run still going (the overlap policy, with the real runs' median duration).

Cost: at most MAX_FIRE_TIMES fire times of each schedule are compared (a window of an
every-second job is cut there, and says so); each looks through the pauses and outages:
at most MAX_FIRE_TIMES x (the job's pauses and outages, at most one per event).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from cronlog.domain.catalogue import JobEvent, RunEvent
from cronlog.domain.exclusions import NO_EXCLUSIONS
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy
from cronlog.domain.schedule import FireTime, Schedule, zone_named
from cronlog.domain.spec import JobSpec
from cronlog.verification.fire_chain import FireChain
from cronlog.verification.window import Window

Record = Mapping[str, Any]

MAX_FIRE_TIMES = 10_000
# A fire written this long after its fire time marks an outage; less is the lookahead's
# ordinary work (fires are written ahead or at once).
OUTAGE_AFTER = timedelta(seconds=2)


@dataclass(frozen=True)
class Interval:
    start: datetime
    end: datetime  # excluded; datetime.max-like for one still open

    def holds(self, instant: datetime) -> bool:
        return self.start <= instant < self.end


@dataclass
class HistoryFacts:
    created_at: datetime
    deleted_at: datetime | None = None
    pauses: list[Interval] = field(default_factory=list)
    outages: list[Interval] = field(default_factory=list)
    durations: list[timedelta] = field(default_factory=list)

    @property
    def typical_duration(self) -> timedelta | None:
        if not self.durations:
            return None
        ordered = sorted(self.durations)
        return ordered[len(ordered) // 2]


def history_facts(job_events: Sequence[tuple[str, Record]],
                  run_events: Iterable[tuple[str, Record]], now: datetime) -> HistoryFacts:
    """What of the job's real history carries over to another spec."""
    created = next(r["at"] for n, r in job_events if n == JobEvent.CREATED)
    facts = HistoryFacts(created)
    paused_at: datetime | None = None
    for name, record in job_events:
        if name == JobEvent.PAUSED and paused_at is None:
            paused_at = record["at"]
        elif name == JobEvent.RESUMED and paused_at is not None:
            facts.pauses.append(Interval(paused_at, record["at"]))
            paused_at = None
        elif name == JobEvent.DELETED and facts.deleted_at is None:
            facts.deleted_at = record["at"]
        elif name == JobEvent.RESTORED and facts.deleted_at is not None:
            # Deleted, then restored (issue 38): it was stopped meanwhile, as when paused.
            facts.pauses.append(Interval(facts.deleted_at, record["at"]))
            facts.deleted_at = None
        elif name == JobEvent.FIRE_ADVANCED and record["at"] - record["fired_at"] > OUTAGE_AFTER:
            facts.outages.append(Interval(record["fired_at"], record["at"]))
    if paused_at is not None:
        facts.pauses.append(Interval(paused_at, now))
    started: dict[tuple[str, int], datetime] = {}
    for name, record in run_events:
        key = (str(record["run_id"]), int(record.get("attempt") or 0))
        if name == RunEvent.ATTEMPT_STARTED or record.get("started_at") is not None:
            # An AttemptSucceeded with started_at stands for its AttemptStarted too.
            started[key] = record["started_at"]
        if name in (RunEvent.ATTEMPT_SUCCEEDED, RunEvent.ATTEMPT_FAILED) and key in started:
            facts.durations.append(max(record["finished_at"] - started[key], timedelta(0)))
    facts.outages = _merged(facts.outages)
    return facts


def _merged(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for interval in sorted(intervals, key=lambda i: i.start):
        if out and interval.start <= out[-1].end:
            out[-1] = Interval(out[-1].start, max(out[-1].end, interval.end))
        else:
            out.append(interval)
    return out


def fire_times(schedule: Schedule, window: Window, after: datetime,
               until: datetime | None) -> tuple[list[FireTime], bool]:
    """The schedule's fire times in the window, from `after` (excluded) and before `until`;
    whether MAX_FIRE_TIMES cut them short."""
    found: list[FireTime] = []
    cursor = max(after, window.since - timedelta(microseconds=1))
    end = min(window.until, until) if until is not None else window.until
    while len(found) < MAX_FIRE_TIMES:
        upcoming = schedule.next_fire_after(cursor)
        if upcoming is None or upcoming >= end:
            return found, False
        found.append(upcoming)
        cursor = upcoming
    return found, True


def current_fire_times(chain: FireChain, window: Window) -> list[FireTime]:
    """The job's real fire times in the window: those fired and those recorded missed (a
    missed range's, by the schedule in force then; at most MAX_FIRE_TIMES)."""
    found = [f.fire_time for f in chain.fires if window.holds(f.fire_time)]
    for missed in chain.missed:
        spec = chain.spec_at(missed.first)
        if spec is None:
            continue
        schedule = spec.schedule(NO_EXCLUSIONS)
        t: FireTime | None = missed.first
        while t is not None and t <= missed.last and len(found) < MAX_FIRE_TIMES:
            if window.holds(t):
                found.append(t)
            t = schedule.next_fire_after(t)
    return sorted(found)


@dataclass
class WhatIf:
    window: Window
    current: list[FireTime]
    proposed: list[FireTime]
    truncated: bool
    late: list[tuple[FireTime, timedelta]] = field(default_factory=list)
    missed: list[tuple[FireTime, str]] = field(default_factory=list)
    overlapping: list[tuple[FireTime, str]] = field(default_factory=list)
    dst_days: list[tuple[date, str, list[FireTime]]] = field(default_factory=list)

    @property
    def added(self) -> list[FireTime]:
        now = set(self.current)
        return [t for t in self.proposed if t not in now]

    @property
    def removed(self) -> list[FireTime]:
        then = set(self.proposed)
        return [t for t in self.current if t not in then]

    def top_of_hour_load(self) -> Counter[datetime]:
        """Fire times added (positive) or removed (negative) at each top of an hour."""
        load: Counter[datetime] = Counter()
        for t in self.added:
            if t.minute == 0 and t.second == 0 and t.microsecond == 0:
                load[t] += 1
        for t in self.removed:
            if t.minute == 0 and t.second == 0 and t.microsecond == 0:
                load[t] -= 1
        return load


def _blocked_until(instant: datetime, blocks: Sequence[Interval]) -> datetime | None:
    """When the pauses and outages holding `instant` were over, if any holds it."""
    ends = [b.end for b in blocks if b.holds(instant)]
    return max(ends) if ends else None


def replay(facts: HistoryFacts, current: list[FireTime], spec: JobSpec, window: Window,
           catch_up_window: timedelta, schedule_of: Callable[[JobSpec], Schedule]
           ) -> WhatIf:
    """`current`: the fire times the job really had in the window (fired or recorded
    missed); `spec` the proposed one; `schedule_of` its schedule (with the calendar the job
    follows, if any)."""
    proposed, truncated = fire_times(schedule_of(spec), window, facts.created_at,
                                     facts.deleted_at)
    result = WhatIf(window, current, proposed, truncated)
    blocks = [*facts.pauses, *facts.outages]
    _decide(result, proposed, blocks, spec, catch_up_window)
    _overlaps(result, proposed, facts.typical_duration, spec.overlap_policy)
    result.dst_days = dst_days(spec.time_zone, window, proposed)
    return result


def _decide(result: WhatIf, proposed: list[FireTime], blocks: Sequence[Interval],
            spec: JobSpec, catch_up_window: timedelta) -> None:
    """Late or missed, each fire time a pause or an outage held, by the misfire policy."""
    held: dict[datetime, list[FireTime]] = {}
    for t in proposed:
        until = _blocked_until(t, blocks)
        if until is not None:
            held.setdefault(until, []).append(t)
    for until, times in held.items():
        overdue = [t for t in times if until - t > catch_up_window]
        on_time = [t for t in times if until - t <= catch_up_window]
        policy = spec.misfire_policy
        if policy == MisfirePolicy.RUN_ALL:
            on_time, overdue = times, []
        elif policy == MisfirePolicy.RUN_LATEST and overdue:
            on_time, overdue = [overdue[-1], *on_time], overdue[:-1]
        result.late += [(t, until - t) for t in sorted(on_time)]
        result.missed += [(t, f"{until - t} late, beyond the catch-up window "
                              f"(misfire policy {policy})") for t in overdue]


def _overlaps(result: WhatIf, proposed: list[FireTime], duration: timedelta | None,
              policy: OverlapPolicy) -> None:
    """Fire times that would meet the run before still going, with the real median run."""
    if duration is None or duration <= timedelta(0):
        return
    outcome = {OverlapPolicy.ALLOW: "runs beside the run before",
               OverlapPolicy.SKIP: "skipped: the run before is still going",
               OverlapPolicy.BUFFER_ONE: "waits for the run before",
               OverlapPolicy.CANCEL_OTHER: "cancels the run before"}[policy]
    busy_until: datetime | None = None
    for t in proposed:
        if busy_until is not None and t < busy_until:
            result.overlapping.append((t, outcome))
            if policy == OverlapPolicy.SKIP:
                continue
            if policy == OverlapPolicy.BUFFER_ONE:
                busy_until += duration
                continue
        busy_until = t + duration


def dst_days(zone_name: str, window: Window, proposed: list[FireTime]
             ) -> list[tuple[date, str, list[FireTime]]]:
    """The days of the window on which the zone's UTC offset changes, with the proposed
    fire times of that local day. One look per day of the window (at most 92)."""
    zone = zone_named(zone_name)
    days: list[tuple[date, str, list[FireTime]]] = []
    day = window.since.astimezone(zone).date()
    last = window.until.astimezone(zone).date()
    while day <= last:
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        end = start + timedelta(days=1)
        before, after = start.utcoffset(), end.utcoffset()
        if before != after:
            on_day = [t for t in proposed if t.astimezone(zone).date() == day]
            days.append((day, f"UTC offset {_offset(before)} to {_offset(after)}", on_day))
        day += timedelta(days=1)
    return days


def _offset(value: timedelta | None) -> str:
    minutes = int((value or timedelta(0)).total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
