"""A job's story from the log: its timeline, and the job as it was at any instant."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronlog.domain.catalogue import RunEvent


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
_DETAIL_FIELDS = ("run_id", "attempt", "fired_at", "scheduled_at", "first", "last", "count",
                  "not_before", "next_fire_at", "started_at", "finished_at", "error", "reason")


def _actor(name: str, record: Mapping[str, Any]) -> str:
    if record.get("request_id"):
        return f"request {record['request_id']}"
    if record.get("worker"):
        return f"worker {record['worker']}"
    if name in (RunEvent.ATTEMPT_LOST, RunEvent.ATTEMPT_TIMED_OUT):
        return "owner (deadline)"
    return "owner (schedule)"


def _detail(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def timeline(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[TimelineEntry]:
    entries = [TimelineEntry(
        at=record["at"], event=name, version=int(record["version"]),
        actor=_actor(name, record),
        details=" ".join(f"{k}={_detail(record[k])}" for k in _DETAIL_FIELDS
                         if record.get(k) is not None))
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
