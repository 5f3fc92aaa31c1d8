"""A job's fire times proved from its own events: replayed through the domain aggregate,
every fire (JobFireAdvanced) and missed range (JobFireTimesMissed) must take up exactly
the fire time the job was at, and record as the next one what its schedule — with the spec,
zone, exclusions and calendar in force then — gives after it. So no fire time is passed
over, none is invented, and none fires while the job is paused, deleted or completed.

Where a command sets the next fire time (creation, update, resume) it is recomputed the
way the domain does and compared too, except for a job that follows a named calendar,
whose snapshot the api took (the calendar's own events are not replayed here).

Cost: one pass over the job's events; each check is one next-fire-time search of the
schedule, bounded as every search is (domain/schedule_search.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronlog.domain.catalogue import SPEC_EVENTS, JobEvent
from cronlog.domain.errors import ScheduleTooCostly
from cronlog.domain.exclusions import NO_EXCLUSIONS
from cronlog.domain.fire_times import first_fire_time
from cronlog.domain.job_restore import restored_next_fire_time
from cronlog.domain.job_status import ACTIVE
from cronlog.domain.schedule import FireTime
from cronlog.verification.findings import Check, Evidence, JobVerdict, job_evidence
from cronlog.verification.window import Window

Record = Mapping[str, Any]
# A stored record's domain event (infra/avro/event_mapping.record_to_event): `.mutate`.
ToEvent = Callable[[str, Record], Any]


@dataclass(frozen=True)
class Fire:
    fire_time: FireTime
    run_id: str
    evidence: Evidence


@dataclass(frozen=True)
class MissedRange:
    first: FireTime
    last: FireTime
    count: int
    evidence: Evidence


@dataclass
class FireChain:
    """What the job's events say was fired and recorded missed, and where it stands."""

    fires: list[Fire] = field(default_factory=list)
    missed: list[MissedRange] = field(default_factory=list)
    # The job after its last event (None: no JobCreated among them).
    job: Any = None
    # Its spec from each instant it was created or updated with.
    specs: list[tuple[datetime, Any]] = field(default_factory=list)

    def spec_at(self, instant: datetime) -> Any:
        """The spec in force at `instant` (None before the job existed)."""
        found = None
        for since, spec in self.specs:
            if since > instant:
                break
            found = spec
        return found


def _search(compute: Callable[[], FireTime | None]) -> tuple[bool, FireTime | None]:
    """(whether it could be recomputed, the fire time). A schedule too costly to search
    was set aside by its owner (invariant 9), not fired; nothing to compare then."""
    try:
        return True, compute()
    except ScheduleTooCostly:
        return False, None


def _follows_calendar(job: Any, spec: Any = None) -> bool:
    return job is not None and (job.calendar is not None or job.spec.calendar is not None
                                or (spec is not None and spec.calendar is not None))


def _expected_next(name: str, record: Record, before: Any, after: Any, status_before: str
                   ) -> tuple[bool, FireTime | None]:
    """The next fire time the domain gives for this event, recomputed; (False, None) when
    this event's is not recomputed here. `before` is the aggregate the event was applied
    to (the same object as `after`: only its fields the event leaves alone are as before);
    `status_before` its status before the event."""
    if name == JobEvent.FIRE_ADVANCED:
        return _search(lambda: before.schedule.next_fire_after(record["fired_at"]))
    if name == JobEvent.FIRE_TIMES_MISSED:
        return _search(lambda: before.schedule.next_fire_after(record["last"]))
    if name == JobEvent.RESUMED:
        if before.last_fired_at is None:
            return _search(lambda: first_fire_time(before.spec, before.schedule,
                                                   before.created_on))
        return _search(lambda: before.schedule.next_fire_after(before.last_fired_at))
    if name == JobEvent.CREATED and not _follows_calendar(after):
        spec = after.spec
        return _search(lambda: first_fire_time(spec, spec.schedule(NO_EXCLUSIONS),
                                               record["at"]))
    if (name == JobEvent.UPDATED and status_before == ACTIVE
            and not _follows_calendar(before, after.spec)):
        spec = after.spec
        since = record["at"]
        if before.last_fired_at is not None:
            since = max(since, before.last_fired_at)
        return _search(lambda: spec.schedule(NO_EXCLUSIONS).next_fire_after(since))
    if name == JobEvent.RESTORED and not _follows_calendar(before, after.spec):
        spec = after.spec
        return _search(lambda: restored_next_fire_time(
            status_before, spec, spec.schedule(NO_EXCLUSIONS), before.last_fired_at,
            before.created_on, record["at"], bool(record.get("skip_missed"))))
    return False, None


def _at(value: FireTime | None) -> str:
    return value.isoformat() if value is not None else "none"


def walk_fire_chain(events: Sequence[tuple[str, Record]], to_event: ToEvent,
                    window: Window, verdict: JobVerdict) -> FireChain:
    """`events`: one job's events in version order. Violations of fire times in the window
    go to `verdict`; the chain holds every fire and missed range, in or out of it."""
    chain = FireChain()
    job: Any = None
    gap = 0  # versions found missing so far: the events after a gap are renumbered
    for name, record in events:
        if name == JobEvent.REQUEST_APPLIED:
            continue  # takes a request id on the job at its current version; no change
        evidence = job_evidence(name, record)
        held = _in_sequence(job, name, record, gap, window, verdict, evidence)
        if held is None:
            continue
        record, gap = held
        before = job
        if name in (JobEvent.FIRE_ADVANCED, JobEvent.FIRE_TIMES_MISSED) and before is not None:
            first = record["fired_at" if name == JobEvent.FIRE_ADVANCED else "first"]
            _check_taken(before, name, first, window, verdict, evidence)
            if name == JobEvent.FIRE_ADVANCED:
                chain.fires.append(Fire(first, str(record["run_id"]), evidence))
                if window.holds(first):
                    verdict.tally.fire_times += 1
            else:
                chain.missed.append(MissedRange(first, record["last"], int(record["count"]),
                                                evidence))
                if window.holds(first):
                    verdict.tally.missed_fire_times += int(record["count"])
        status_before = before.status if before is not None else ""
        job = to_event(name, record).mutate(job)
        if name in SPEC_EVENTS and job is not None:
            chain.specs.append((record["at"], job.spec))
        if job is None or "next_fire_at" not in record:
            continue
        known, expected = _expected_next(name, record, before, job, status_before)
        recorded = record["next_fire_at"]
        if known and expected != recorded and _in_view(window, expected, recorded):
            verdict.violate(
                Check.FIRE_TIME_OFF_SCHEDULE,
                f"{name} recorded the next fire time {_at(recorded)}; the job's schedule "
                f"gives {_at(expected)}", fire_time=expected or recorded, evidence=(evidence,))
    chain.job = job
    return chain


def _in_sequence(job: Any, name: str, record: Record, gap: int, window: Window,
                 verdict: JobVerdict, evidence: Evidence) -> tuple[Record, int] | None:
    """The record to apply next and the versions missing so far: as it is when its version
    follows the job's; None for a second event of a version already applied; renumbered
    after a gap. Repeats and gaps are reported."""
    version = int(record["version"]) - gap
    expected = 1 if job is None else int(job.version) + 1
    if version == expected:
        return ({**record, "version": version} if gap else record), gap
    shown = window.holds(record["at"])
    if version < expected:
        if shown:
            verdict.violate(Check.JOB_EVENT_REPEATED,
                            f"{name} is a second event of version {version}: two writers "
                            "of the job at once", evidence=(evidence,))
        return None
    if shown:
        verdict.violate(Check.JOB_EVENTS_MISSING,
                        f"versions {expected + gap} to {version + gap - 1} of the job's events "
                        f"are not in the log (the next held is {name})", evidence=(evidence,))
    return {**record, "version": expected}, gap + version - expected


def _in_view(window: Window, *times: FireTime | None) -> bool:
    return any(t is not None and window.holds(t) for t in times)


def _check_taken(before: Any, name: str, taken: FireTime, window: Window,
                 verdict: JobVerdict, evidence: Evidence) -> None:
    """A fire or missed range must take up the fire time the job was at, while active."""
    if not window.holds(taken):
        return
    what = "fired" if name == JobEvent.FIRE_ADVANCED else "recorded missed"
    if before.status != ACTIVE:
        verdict.violate(Check.FIRED_WHILE_INACTIVE,
                        f"{what} {taken.isoformat()} while the job was {before.status}",
                        fire_time=taken, evidence=(evidence,))
        return
    due = before.next_fire_at
    if due is not None and due < taken:
        verdict.violate(Check.FIRE_TIME_SKIPPED,
                        f"{what} {taken.isoformat()} while the job was due at "
                        f"{due.isoformat()}: the fire times from {due.isoformat()} on were "
                        "neither run nor recorded missed", fire_time=due,
                        evidence=(evidence,))
    elif due != taken:
        verdict.violate(Check.FIRE_TIME_OFF_SCHEDULE,
                        f"{what} {taken.isoformat()}, not the job's fire time {_at(due)}",
                        fire_time=taken, evidence=(evidence,))


def check_not_stalled(chain: FireChain, window: Window, settled_before: datetime,
                      verdict: JobVerdict) -> None:
    """A job still active whose next fire time passed long enough ago, unfired."""
    job = chain.job
    if job is None or job.status != ACTIVE or job.next_fire_at is None:
        return
    due: datetime = job.next_fire_at
    if due < min(window.until, settled_before):
        verdict.violate(Check.FIRE_TIME_NOT_FIRED,
                        f"due at {due.isoformat()} and not fired by the end of the log",
                        fire_time=due)
