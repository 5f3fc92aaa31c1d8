"""Job lifecycle events -> one ClickHouse row per job (latest state), for analytics joins;
missed fire time ranges -> one row per range; dependency events (issue 16) -> one row each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol
from uuid import UUID

from cronlog.domain.catalogue import CalendarEvent, ChannelEvent, JobEvent
from cronlog.projections.history import (
    UINT32_MAX,
    UINT64_MAX,
    check_time,
    check_unsigned,
    micros,
)
from cronlog.projections.job_timeline import JobEventRow, timeline_rows
from cronlog.projections.state import JOB_STATUS_AFTER

# Fire-by-fire progress is not history: it stays in Postgres and in the run tables.
INT64_MAX = 2**63 - 1
IGNORED = frozenset({JobEvent.FIRE_ADVANCED, JobEvent.BACKFILL_REQUESTED, JobEvent.REQUEST_APPLIED,
                     # Calendars (issue 20): a calendar's events name no job; the job's
                     # applied version moves its next fire time only (the timeline has it).
                     JobEvent.CALENDAR_APPLIED, *CalendarEvent,
                     # Alert channels (issue 37) name no job either.
                     *ChannelEvent})


class MissingJob(LookupError):
    """A lifecycle event for a job whose JobCreated the history never saw."""


class JobChangedTenant(ValueError):
    """A JobUpdated that moves its job to another tenant, which the domain refuses: stored,
    it would show the job to the other tenant."""


@dataclass(frozen=True)
class JobHistoryRow:
    created_at_us: int
    tenant: str
    job_id: str
    name: str
    queue: str
    handler: str
    cron: str
    at_us: int
    time_zone: str
    status: str
    label_keys: tuple[str, ...]
    label_values: tuple[str, ...]
    updated_at_us: int
    version: int
    # A dependent job's `after` (issue 16): empty, "" and 0 for cron and one-off jobs.
    after_job_ids: tuple[str, ...] = ()
    after_condition: str = ""
    wait_window_ms: int = 0
    # The jobs that run after this one (JobDependentLinked/Unlinked).
    dependent_job_ids: tuple[str, ...] = ()
    # The spec's schedule kind (cron, at, every, after) and an interval job's interval: an
    # interval job has neither a cron nor an at, so without them its schedule is not there.
    schedule_kind: str = ""
    every_ms: int = 0


@dataclass(frozen=True)
class DependencyEventRow:
    """One dependency event of a job's log: a dependent linked to or unlinked from this
    (upstream) job; an upstream end that changed this (dependent) job's fan-in; an upstream
    that refused this job's link. Fields the event does not have are "" or 0."""

    at_us: int
    tenant: str
    job_id: str
    version: int
    event_type: str
    dependent_job_id: str = ""
    upstream_job_id: str = ""
    upstream_run_id: str = ""
    upstream_status: str = ""
    logical_time_us: int = 0
    cascade: str = ""
    depth: int = 0
    # waiting, decided or closed (JobUpstreamRecorded).
    folded: str = ""
    opened_at_us: int = 0
    reason: str = ""


@dataclass(frozen=True)
class MissedFireTimesRow:
    """One JobFireTimesMissed range: the schedule's fire times first..last, count of them,
    recorded and not run."""

    recorded_at_us: int
    tenant: str
    job_id: str
    first_us: int
    last_us: int
    count: int
    reason: str
    # The job's version after the event: a redelivered event writes the same row again.
    version: int


class JobHistoryStore(Protocol):
    def write_job_rows(self, rows: Sequence[JobHistoryRow]) -> None: ...

    def latest_job_rows(self, job_ids: Sequence[str]) -> dict[str, JobHistoryRow]: ...

    def write_missed_fire_times(self, rows: Sequence[MissedFireTimesRow]) -> None: ...

    def write_dependency_events(self, rows: Sequence[DependencyEventRow]) -> None: ...

    def write_job_events(self, rows: Sequence[JobEventRow]) -> None: ...


MISSED_RANGE = JobEvent.FIRE_TIMES_MISSED
DEPENDENCY_EVENTS = frozenset({JobEvent.DEPENDENT_LINKED, JobEvent.DEPENDENT_UNLINKED,
                               JobEvent.UPSTREAM_RECORDED, JobEvent.UPSTREAM_UNAVAILABLE})


LINKS = frozenset({JobEvent.DEPENDENT_LINKED, JobEvent.DEPENDENT_UNLINKED})


def _dependents(current: JobHistoryRow, name: str, record: Mapping[str, Any]
                ) -> tuple[str, ...]:
    """The job's dependents after a link event: the event lists them all; a record without
    the list changes the one it names."""
    listed = record.get("dependents")
    if listed is not None:
        return tuple(sorted(str(UUID(str(j))) for j in listed))
    named = _uuid(record, "dependent_job_id")
    others = [j for j in current.dependent_job_ids if j != named]
    return tuple(sorted([*others, named] if name == JobEvent.DEPENDENT_LINKED else others))


def _uuid(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    return "" if value is None else str(UUID(str(value)))


def dependency_row(name: str, record: Mapping[str, Any], tenant: str) -> DependencyEventRow:
    """The event's row; tenant is its job's (dependency events do not repeat it)."""
    return DependencyEventRow(
        at_us=micros(record["at"]), tenant=tenant, job_id=str(UUID(str(record["job_id"]))),
        version=int(record["version"]), event_type=name,
        dependent_job_id=_uuid(record, "dependent_job_id"),
        upstream_job_id=_uuid(record, "upstream_job_id"),
        upstream_run_id=_uuid(record, "upstream_run_id"),
        upstream_status=str(record.get("status") or ""),
        logical_time_us=micros(record.get("logical_time")),
        cascade=str(record.get("cascade") or ""), depth=int(record.get("depth") or 0),
        folded=str(record.get("folded") or ""), opened_at_us=micros(record.get("opened_at")),
        reason=str(record.get("reason") or ""))


def missed_row(record: Mapping[str, Any]) -> MissedFireTimesRow:
    return MissedFireTimesRow(
        recorded_at_us=micros(record["at"]), tenant=str(record["tenant"]),
        job_id=str(UUID(str(record["job_id"]))), first_us=micros(record["first"]),
        last_us=micros(record["last"]), count=int(record["count"]),
        reason=str(record["reason"]), version=int(record["version"]))


def _row(record: Mapping[str, Any], created_at_us: int, status: str,
         dependents: tuple[str, ...] = ()) -> JobHistoryRow:
    spec = record["spec"]
    labels = sorted((spec.get("labels") or {}).items())
    after = spec.get("after") or {}
    schedule = spec["schedule"]
    kind = str(schedule.get("kind") or "")
    return JobHistoryRow(
        created_at_us=created_at_us, tenant=spec["tenant"], job_id=str(record["job_id"]),
        name=spec["name"], queue=spec["queue"], handler=spec["handler"],
        cron=schedule.get("cron") or "", at_us=micros(schedule.get("at")),
        time_zone=spec["time_zone"], status=status,
        label_keys=tuple(k for k, _ in labels), label_values=tuple(v for _, v in labels),
        updated_at_us=micros(record["at"]), version=int(record["version"]),
        after_job_ids=tuple(str(UUID(str(j))) for j in after.get("job_ids") or ()),
        dependent_job_ids=dependents,
        after_condition=str(after.get("condition") or ""),
        wait_window_ms=int(after.get("wait_window_ms") or 0),
        # Records of schema versions before interval jobs have no every_ms.
        schedule_kind=kind,
        every_ms=int(schedule.get("every_ms") or 0) if kind == "every" else 0)


class JobHistoryProjector:
    def __init__(self, store: JobHistoryStore) -> None:
        self._store = store

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        missed = [missed_row(r) for n, r in events if n == MISSED_RANGE]
        for m in missed:
            _check_missed(m)
        if missed:
            # Rows keyed by the range: written again on redelivery, the store keeps one.
            self._store.write_missed_fire_times(missed)
        relevant = [(n, r) for n, r in events if n not in IGNORED and n != MISSED_RANGE]
        wanted = sorted({str(r["job_id"]) for n, r in relevant if n != JobEvent.CREATED})
        rows = self._store.latest_job_rows(wanted) if wanted else {}
        dependency: list[DependencyEventRow] = []
        for name, record in relevant:
            job_id = str(UUID(str(record["job_id"])))
            current = rows.get(job_id)
            if name in DEPENDENCY_EVENTS:
                # Kept whatever the job row's version: its rows are keyed by their own
                # version, so a redelivery writes the same row again, and one written
                # before a failed job row insert is not lost when the batch comes again.
                if current is None:
                    raise MissingJob(f"{name} for job {job_id} without its JobCreated")
                dependency.append(dependency_row(name, record, current.tenant))
                if name in LINKS and current.version < int(record["version"]):
                    rows[job_id] = replace(current, dependent_job_ids=_dependents(current, name, record),
                                           updated_at_us=micros(record["at"]),
                                           version=int(record["version"]))
                continue
            if current is not None and current.version >= int(record["version"]):
                continue  # redelivered
            if name == JobEvent.CREATED:
                # A dependent job has no fire time of its own and stays active (issue 16).
                status = ("active" if record.get("next_fire_at") or record["spec"].get("after")
                          else "completed")
                rows[job_id] = _row(record, micros(record["at"]), status)
            elif current is None:
                raise MissingJob(f"{name} for job {job_id} without its JobCreated")
            elif name in (JobEvent.UPDATED, JobEvent.RESTORED):
                # A restore (issue 38) gives back a spec and may bring the job back.
                status = (str(record["status"]) if name == JobEvent.RESTORED
                          else current.status)
                updated = _row(record, current.created_at_us, status,
                               current.dependent_job_ids)
                if updated.tenant != current.tenant:
                    raise JobChangedTenant(f"{name} v{updated.version} moves job {job_id} "
                                           "to another tenant")
                rows[job_id] = updated
            elif name in JOB_STATUS_AFTER:
                rows[job_id] = replace(current, status=JOB_STATUS_AFTER[name],
                                       updated_at_us=micros(record["at"]),
                                       version=int(record["version"]))
            else:
                raise MissingJob(f"job history does not know {name!r}")
        for row in rows.values():
            check_time("created_at", row.created_at_us)
            check_unsigned("version", row.version, UINT64_MAX)
            check_unsigned("wait_window_ms", row.wait_window_ms, INT64_MAX)
            check_unsigned("every_ms", row.every_ms, UINT64_MAX)
        # The console's audit timeline (projections/job_timeline.py).
        timeline = timeline_rows(self._store, events,
                                 {j: r.tenant for j, r in rows.items()})
        for event in dependency:
            _check_dependency(event)
        if dependency:
            self._store.write_dependency_events(dependency)
        if rows:
            self._store.write_job_rows(list(rows.values()))
        if timeline:
            self._store.write_job_events(timeline)


def _check_dependency(row: DependencyEventRow) -> None:
    check_time("at", row.at_us)
    check_unsigned("version", row.version, UINT64_MAX)
    check_unsigned("depth", row.depth, UINT32_MAX)
    if row.logical_time_us:
        check_time("logical_time", row.logical_time_us)
    if row.opened_at_us:
        check_time("opened_at", row.opened_at_us)


def _check_missed(row: MissedFireTimesRow) -> None:
    check_time("at", row.recorded_at_us)
    check_time("first", row.first_us)
    check_time("last", row.last_us)
    check_unsigned("count", row.count, UINT64_MAX)
    check_unsigned("version", row.version, UINT64_MAX)
