"""A job's story from the log: its timeline, and the job as it was at any instant."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronlog.domain.catalogue import JobEvent, RunEvent


@dataclass(frozen=True)
class TimelineEntry:
    at: datetime
    event: str
    version: int
    # Who caused it: the command's request id, the worker that reported, or the scheduler.
    actor: str
    details: str


# A missed range (JobFireTimesMissed) shows as first=… last=… count=…: every fire time of
# the schedule between the two, recorded and not run.
# A JobRequestApplied names its command (a trigger changes no job field, so it is all the
# job's log says of it).
# A re-drive (RunRedriven) names who asked and the last attempt before it.
# A restore (JobRestored, issue 38) names the version whose spec it gave back, the job's
# status after it and whether the fire times since a delete were skipped by request.
# Dependencies (issue 16): a link names the dependent; an upstream end recorded names the
# upstream run, how it ended, its slot (logical time and cascade) and what it did to the slot.
_DETAIL_FIELDS = ("command", "run_id", "attempt", "fired_at", "scheduled_at", "first", "last", "count",
                  "not_before", "next_fire_at", "started_at", "finished_at",
                  "dependent_job_id", "upstream_job_id", "upstream_run_id", "status",
                  "logical_time", "cascade", "upstream_run_ids", "depth", "folded", "opened_at",
                  "error", "reason", "requested_by", "attempts_before", "restored_version",
                  "skip_missed")
_DEPENDENCY_EVENTS = frozenset({JobEvent.DEPENDENT_LINKED, JobEvent.DEPENDENT_UNLINKED,
                                JobEvent.UPSTREAM_RECORDED, JobEvent.UPSTREAM_UNAVAILABLE})
_CREATES_RUN = frozenset({RunEvent.SCHEDULED, RunEvent.MISSED, RunEvent.SKIPPED})


def _actor(name: str, record: Mapping[str, Any]) -> str:
    if record.get("request_id"):
        return f"request {record['request_id']}"
    if record.get("worker"):
        return f"worker {record['worker']}"
    if name in (RunEvent.ATTEMPT_LOST, RunEvent.ATTEMPT_TIMED_OUT):
        return "owner (deadline)"
    if name in _DEPENDENCY_EVENTS or record.get("trigger") == "dependency":
        return "owner (dependency)"
    return "owner (schedule)"


def _detail(key: str, value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if key == "cascade":
        return cascade_name(value)
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def cascade_name(cascade: str | None) -> str:
    return "scheduled" if cascade == "" else f"request:{cascade}"


def _details(name: str, record: Mapping[str, Any]) -> str:
    chained = name in _DEPENDENCY_EVENTS or record.get("trigger") == "dependency" or bool(
        record.get("cascade"))
    return " ".join(f"{k}={_detail(k, record[k])}" for k in _DETAIL_FIELDS
                    if record.get(k) is not None and record.get(k) != []
                    # A run's chain fields only where they say something: every run of the
                    # scheduled chain has cascade '' and depth 0.
                    and (chained or k not in ("cascade", "depth", "upstream_run_ids")))


def timeline(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[TimelineEntry]:
    entries = [TimelineEntry(
        at=record["at"], event=name, version=int(record["version"]),
        actor=_actor(name, record), details=_details(name, record))
        for name, record in events]
    # Within one owner transaction the job's events come before its runs' events.
    return sorted(entries, key=lambda e: (e.at, not e.event.startswith("Job"), e.version))


def job_as_of(job_events: Iterable[tuple[str, Mapping[str, Any]]], instant: datetime,
              to_event: Callable[[str, Mapping[str, Any]], Any]) -> Any:
    """Replays the job's events up to instant through the domain aggregate; None if the job
    did not exist yet."""
    aggregate = None
    for name, record in sorted(job_events, key=lambda e: int(e[1]["version"])):
        if record["at"] > instant:
            break
        aggregate = to_event(name, record).mutate(aggregate)
    return aggregate


def why_dependency_runs(job_events: Iterable[tuple[str, Mapping[str, Any]]],
                        run_events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Why each dependency run of the job exists: its slot (logical time, cascade), depth,
    and each upstream run with its job and how it ended, as this job's own log recorded it
    (JobUpstreamRecorded); an upstream run the log does not show is said to be so."""
    ends: dict[str, Mapping[str, Any]] = {}
    for name, record in job_events:
        if name == JobEvent.UPSTREAM_RECORDED:
            ends.setdefault(str(record["upstream_run_id"]), record)
    lines: list[str] = []
    for name, record in sorted(run_events, key=lambda e: e[1]["at"]):
        if name not in _CREATES_RUN or record.get("trigger") != "dependency":
            continue
        logical = record.get("logical_time") or record["scheduled_at"]
        outcome = {RunEvent.SCHEDULED: "scheduled", RunEvent.MISSED: "recorded MISSED",
                   RunEvent.SKIPPED: "recorded SKIPPED"}[RunEvent(name)]
        lines.append(f"run {record['run_id']} {outcome} at {_detail('at', record['at'])} "
                     f"after its upstream runs: logical time {_detail('at', logical)}, "
                     f"cascade {cascade_name(record.get('cascade'))}, "
                     f"depth {int(record.get('depth') or 0)}")
        if name != RunEvent.SCHEDULED:
            lines.append(f"  reason: {record.get('reason')}")
        for upstream in record.get("upstream_run_ids") or ():
            end = ends.get(str(upstream))
            if end is None:
                lines.append(f"  upstream run {upstream}: its end is not in this job's log")
                continue
            lines.append(f"  upstream run {upstream}: job {end['upstream_job_id']} ended "
                         f"{end['status']} (recorded {_detail('at', end['at'])}, slot opened "
                         f"{_detail('at', end['opened_at'])}, {end['folded']})")
    return lines
