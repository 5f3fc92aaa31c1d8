"""Event -> Postgres state: the jobs table with its due index, in-flight runs, request ids.

Events are applied from their decoded records, so the live path (right after the owner's
transaction commits) and the catch-up path (replaying the log on takeover) share one code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from cronlog.domain.catalogue import CalendarEvent, JobEvent, RunEvent
from cronlog.domain.exclusions import AppliedCalendar, DateRange, Exclusions
from cronlog.domain.ids import as_uuid
from cronlog.projections.channel_state import CHANNEL_EVENTS, ChannelChange, channel_change


class UnknownEvent(ValueError):
    """An event this projection does not know; the projection stops rather than skip it."""


@dataclass(frozen=True)
class JobRow:
    job_id: UUID
    partition: int
    tenant: str
    name: str
    status: str
    version: int
    # The encoded JobCreated/JobUpdated event that set the job's current spec.
    spec_event: bytes
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    created_at: datetime
    updated_at: datetime
    # Jobs that run after this one (issue 16).
    dependents: tuple[UUID, ...] = ()
    # What ListJobs filters by besides name and status (the job_listing table). Only set on
    # rows made from a JobCreated; a row read back from the jobs table leaves them empty.
    queue: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    # The named calendar the job follows as last published to it (issue 20): read back
    # from the jobs table; a row made from a JobCreated gets it from the JobCalendarApplied
    # that follows.
    calendar: AppliedCalendar | None = None
    # The version of the event that last changed the spec or the status (Job.revision):
    # what users see as the job's version. 0 until set from the row or its JobCreated.
    revision: int = 0
    # The version of the event its spec is from (issue 38): set from the JobCreated, moved
    # by a JobUpdated or JobRestored; None in a row read back from the jobs table.
    spec_version: int | None = None


@dataclass(frozen=True)
class CalendarRow:
    """A calendar as its last CalendarCreated/Updated left it (issue 20)."""

    calendar_id: UUID
    partition: int
    tenant: str
    name: str
    version: int
    description: str
    # As Exclusions.texts() gives them: "YYYY-MM-DD" or "YYYY-MM-DD..YYYY-MM-DD".
    exclusions: tuple[str, ...]
    updated_at: datetime


@dataclass(frozen=True)
class WaitingEnd:
    """An upstream end a dependent job's logical time waits with (JobUpstreamRecorded)."""

    job_id: UUID
    partition: int
    logical_time: datetime
    cascade: str
    upstream_job_id: UUID
    upstream_run_id: UUID
    status: str
    depth: int
    opened_at: datetime


@dataclass(frozen=True)
class SettledSlot:
    """A dependent job's logical time that waits no more: decided, missed or closed."""

    job_id: UUID
    partition: int
    logical_time: datetime
    cascade: str
    settled_at: datetime
    upstream_run_ids: tuple[UUID, ...]


@dataclass(frozen=True)
class RunRow:
    run_id: UUID
    job_id: UUID
    partition: int
    scheduled_at: datetime
    status: str
    attempt: int
    attempt_status: str
    version: int
    not_before: datetime
    # The encoded RunScheduled event: what the run is and which policy retries it.
    scheduled_event: bytes
    updated_at: datetime
    trigger: str = "schedule"
    # The last attempt before a re-drive (domain/run_redrive.py).
    attempt_base: int = 0


class LoggedEvent(Protocol):
    """A committed event with where it sits in its topic partition."""

    @property
    def offset(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def record(self) -> Mapping[str, Any]: ...

    @property
    def raw(self) -> bytes: ...


class StateWriter(Protocol):
    def insert_job(self, row: JobRow) -> None: ...

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None: ...

    def insert_run(self, row: RunRow) -> None: ...

    def update_run(self, run_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None: ...

    def record_request(self, request_id: str, partition: int, job_id: UUID,
                       job_version: int, command: str | None = None,
                       digest: str | None = None) -> None:
        """Takes the request id on the job. Without a command and digest (a job event's own
        request id) it never overrides one recorded with them."""

    def set_dependents(self, job_id: UUID, dependents: tuple[UUID, ...]) -> None: ...

    def wait_with(self, end: WaitingEnd) -> None: ...

    def settle(self, slot: SettledSlot) -> None: ...

    def set_calendar(self, job_id: UUID, calendar: AppliedCalendar | None,
                     unless_named: str | None = None) -> None:
        """Sets the job's applied calendar; to None with unless_named: clears it unless it
        is the calendar of that name."""

    def put_calendar(self, row: CalendarRow) -> None:
        """Creates or replaces the calendar, unless it holds that version or a newer one."""

    def subscribe(self, calendar_id: UUID, job_id: UUID, partition: int,
                  subscribed: bool) -> None: ...

    def change_channel(self, change: ChannelChange) -> None:
        """Applies a channel's event to its row, unless the row is at that version or a
        newer one (issue 37)."""


# What a job lifecycle event leaves its job as (the state and the history agree).
JOB_STATUS_AFTER: dict[str, str] = {
    JobEvent.PAUSED: "paused", JobEvent.RESUMED: "active", JobEvent.COMPLETED: "completed",
    JobEvent.DELETED: "deleted"}
# Job events that change nothing this projection keeps beyond the version (and request id).
JOB_VERSION_ONLY = frozenset({JobEvent.BACKFILL_REQUESTED, JobEvent.UPSTREAM_UNAVAILABLE})
DEPENDENTS_CHANGED = frozenset({JobEvent.DEPENDENT_LINKED, JobEvent.DEPENDENT_UNLINKED})


def apply_job_event(writer: StateWriter, partition: int, name: str, record: Mapping[str, Any],
                    raw: bytes) -> None:
    if name in CALENDAR_EVENTS:
        _apply_calendar_event(writer, partition, name, record)
        return
    if name in CHANNEL_EVENTS:
        # A channel's request id is taken on its id by the JobRequestApplied written with
        # it, as a calendar's is.
        writer.change_channel(channel_change(partition, name, record))
        return
    job_id = as_uuid(record["job_id"])
    version = int(record["version"])
    at: datetime = record["at"]
    if name == JobEvent.REQUEST_APPLIED:
        # Changes nothing in the job: only which request ids it has taken, and for what.
        writer.record_request(str(record["request_id"]), partition, job_id, version,
                              command=str(record["command"]),
                              digest=str(record["request_digest"]))
        return
    if name == JobEvent.CREATED:
        spec = record["spec"]
        writer.insert_job(JobRow(
            job_id=job_id, partition=partition, tenant=spec["tenant"], name=spec["name"],
            status="active" if record.get("next_fire_at") or spec.get("after") else "completed",
            version=version, revision=version, spec_version=version,
            spec_event=raw, next_fire_at=record.get("next_fire_at"), last_fired_at=None,
            created_at=at, updated_at=at, queue=str(spec.get("queue", "")), labels=_labels(spec),
        ))
    elif name in (JobEvent.UPDATED, JobEvent.RESTORED):
        changes: dict[str, Any] = {
            "spec_event": raw, "spec_version": version, "name": record["spec"]["name"],
            "revision": version, "next_fire_at": record.get("next_fire_at"),
            "queue": str(record["spec"].get("queue", "")), "labels": _labels(record["spec"])}
        if name == JobEvent.RESTORED:
            changes["status"] = str(record["status"])
        writer.update_job(job_id, version, at, changes)
        # A spec naming another calendar, or none, drops the one applied (Job._updated).
        writer.set_calendar(job_id, None, unless_named=record["spec"].get("calendar"))
    elif name == JobEvent.CALENDAR_APPLIED:
        writer.update_job(job_id, version, at, {"next_fire_at": record.get("next_fire_at")})
        writer.set_calendar(job_id, AppliedCalendar(
            name=str(record["name"]), version=int(record["calendar_version"]),
            found=bool(record["found"]), exclusions=exclusions_of(record)))
    elif name == JobEvent.FIRE_ADVANCED:
        writer.update_job(job_id, version, at, {
            "next_fire_at": record.get("next_fire_at"), "last_fired_at": record["fired_at"]})
    elif name == JobEvent.FIRE_TIMES_MISSED:
        # A range of fire times recorded, not run: no run rows, the job moves past them.
        writer.update_job(job_id, version, at, {
            "next_fire_at": record.get("next_fire_at"), "last_fired_at": record["last"]})
    elif name in JOB_VERSION_ONLY:
        writer.update_job(job_id, version, at, {})
    elif name in DEPENDENTS_CHANGED:
        writer.update_job(job_id, version, at, {})
        writer.set_dependents(job_id, tuple(as_uuid(d) for d in record["dependents"]))
    elif name == JobEvent.UPSTREAM_RECORDED:
        writer.update_job(job_id, version, at, {})
        _record_upstream(writer, partition, job_id, record)
    elif name in JOB_STATUS_AFTER:
        changes = {"status": JOB_STATUS_AFTER[name], "revision": version}
        if name == JobEvent.RESUMED:
            changes["next_fire_at"] = record.get("next_fire_at")
        elif name in (JobEvent.COMPLETED, JobEvent.DELETED):
            changes["next_fire_at"] = None
        writer.update_job(job_id, version, at, changes)
    else:
        raise UnknownEvent(f"job event {name!r} is not known to the state projection")
    request_id = record.get("request_id")
    if request_id:
        writer.record_request(str(request_id), partition, job_id, version)


def _labels(spec: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in (spec.get("labels") or {}).items()))


CALENDAR_EVENTS = frozenset(CalendarEvent)


def exclusions_of(record: Mapping[str, Any]) -> Exclusions:
    return Exclusions(tuple(DateRange(r["first"], r["last"])
                            for r in record.get("exclusions") or ()))


def _apply_calendar_event(writer: StateWriter, partition: int, name: str,
                          record: Mapping[str, Any]) -> None:
    """A calendar's events (keyed by the calendar's id) keep the calendars table and its
    subscribers. A calendar command's request id is taken on the calendar's id by the
    JobRequestApplied written with it, as a job command's is on the job's."""
    calendar_id = as_uuid(record["calendar_id"])
    if name in (CalendarEvent.CREATED, CalendarEvent.UPDATED):
        writer.put_calendar(CalendarRow(
            calendar_id=calendar_id, partition=partition, tenant=str(record["tenant"]),
            name=str(record["name"]), version=int(record["version"]),
            description=str(record.get("description") or ""),
            exclusions=tuple(exclusions_of(record).texts()), updated_at=record["at"]))
    else:
        writer.subscribe(calendar_id, as_uuid(record["job_id"]), partition,
                         subscribed=name == CalendarEvent.JOB_SUBSCRIBED)


def _record_upstream(writer: StateWriter, partition: int, job_id: UUID,
                     record: Mapping[str, Any]) -> None:
    """A waiting end is kept until its logical time settles; a closing one settles it (a
    deciding one is settled by the dependent run it made, in the same transaction)."""
    if record["folded"] == "waiting":
        writer.wait_with(WaitingEnd(
            job_id=job_id, partition=partition, logical_time=record["logical_time"],
            cascade=record["cascade"], upstream_job_id=as_uuid(record["upstream_job_id"]),
            upstream_run_id=as_uuid(record["upstream_run_id"]), status=record["status"],
            depth=int(record["depth"]), opened_at=record["opened_at"]))
    elif record["folded"] == "closed":
        writer.settle(SettledSlot(
            job_id=job_id, partition=partition, logical_time=record["logical_time"],
            cascade=record["cascade"], settled_at=record["at"],
            upstream_run_ids=(as_uuid(record["upstream_run_id"]),)))


def _run_changes(name: str, r: Mapping[str, Any]) -> dict[str, Any] | None:
    if name == RunEvent.ATTEMPT_DISPATCHED:
        return {"status": "scheduled", "attempt": r["attempt"], "attempt_status": "dispatched",
                "not_before": r["not_before"]}
    if name == RunEvent.ATTEMPT_WAITING:
        return {"status": "scheduled", "attempt": r["attempt"], "attempt_status": "waiting",
                "not_before": r["not_before"]}
    if name == RunEvent.ATTEMPT_STARTED:
        return {"status": "running", "attempt": r["attempt"], "attempt_status": "running"}
    changes: dict[str, dict[str, Any]] = {
        # Ends its run too; older logs follow it with RunSucceeded, which changes nothing.
        RunEvent.ATTEMPT_SUCCEEDED: {"attempt_status": "succeeded", "status": "succeeded"},
        RunEvent.ATTEMPT_FAILED: {"attempt_status": "failed"},
        RunEvent.ATTEMPT_LOST: {"attempt_status": "lost"},
        RunEvent.ATTEMPT_TIMED_OUT: {"attempt_status": "timed_out"},
        RunEvent.ATTEMPT_CANCELLED: {"attempt_status": "cancelled"},
        # Shown by the history only (GetRun reads it there): the run's version moves on.
        RunEvent.ATTEMPT_PROGRESSED: {},
        RunEvent.CANCELLED: {"status": "cancelled"},
        RunEvent.SUCCEEDED: {"status": "succeeded"},
        # Out of retries: the run is on the dead-letter topic.
        RunEvent.FAILED: {"status": "dead_lettered"},
    }
    if name == RunEvent.REDRIVEN:
        return {"status": "scheduled", "attempt_base": r["attempts_before"]}
    return changes.get(name)


# Fire times recorded as runs that do not run.
NOT_RUN_STATUS: dict[str, str] = {RunEvent.MISSED: "missed", RunEvent.SKIPPED: "skipped"}


def apply_run_event(writer: StateWriter, partition: int, name: str, record: Mapping[str, Any],
                    raw: bytes) -> None:
    run_id = as_uuid(record["run_id"])
    version = int(record["version"])
    at: datetime = record["at"]
    if name in (RunEvent.SCHEDULED, RunEvent.MISSED, RunEvent.SKIPPED):
        not_run = NOT_RUN_STATUS.get(name)
        # RunScheduled v2 carries its first attempt's dispatch (0: held, or a v1 event).
        attempt = int(record.get("attempt") or 0)
        writer.insert_run(RunRow(
            run_id=run_id, job_id=as_uuid(record["job_id"]), partition=partition,
            scheduled_at=record["scheduled_at"], status=not_run or "scheduled",
            attempt=attempt, attempt_status="dispatched" if attempt else "none",
            version=version,
            not_before=record["scheduled_at"] if not_run else record["not_before"],
            scheduled_event=raw, updated_at=at, trigger=record.get("trigger") or "schedule",
        ))
        if record.get("trigger") == "dependency":
            writer.settle(SettledSlot(
                job_id=as_uuid(record["job_id"]), partition=partition,
                logical_time=record.get("logical_time") or record["scheduled_at"],
                cascade=record.get("cascade") or "", settled_at=at,
                upstream_run_ids=tuple(as_uuid(u) for u in record.get("upstream_run_ids") or ())))
        return
    changes = _run_changes(name, record)
    if changes is None:
        raise UnknownEvent(f"run event {name!r} is not known to the state projection")
    writer.update_run(run_id, version, at, changes)
