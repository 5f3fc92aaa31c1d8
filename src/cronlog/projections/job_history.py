"""Job lifecycle events -> one ClickHouse row per job (latest state), for analytics joins;
missed fire time ranges -> one row per range."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol
from uuid import UUID

from cronlog.domain.catalogue import JobEvent
from cronlog.projections.history import UINT64_MAX, check_time, check_unsigned, micros
from cronlog.projections.state import JOB_STATUS_AFTER

# Fire-by-fire progress is not history: it stays in Postgres and in the run tables.
IGNORED = frozenset({JobEvent.FIRE_ADVANCED, JobEvent.BACKFILL_REQUESTED, JobEvent.REQUEST_APPLIED})


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


MISSED_RANGE = JobEvent.FIRE_TIMES_MISSED


def missed_row(record: Mapping[str, Any]) -> MissedFireTimesRow:
    return MissedFireTimesRow(
        recorded_at_us=micros(record["at"]), tenant=str(record["tenant"]),
        job_id=str(UUID(str(record["job_id"]))), first_us=micros(record["first"]),
        last_us=micros(record["last"]), count=int(record["count"]),
        reason=str(record["reason"]), version=int(record["version"]))


def _row(record: Mapping[str, Any], created_at_us: int, status: str) -> JobHistoryRow:
    spec = record["spec"]
    labels = sorted((spec.get("labels") or {}).items())
    return JobHistoryRow(
        created_at_us=created_at_us, tenant=spec["tenant"], job_id=str(record["job_id"]),
        name=spec["name"], queue=spec["queue"], handler=spec["handler"],
        cron=spec["schedule"].get("cron") or "", at_us=micros(spec["schedule"].get("at")),
        time_zone=spec["time_zone"], status=status,
        label_keys=tuple(k for k, _ in labels), label_values=tuple(v for _, v in labels),
        updated_at_us=micros(record["at"]), version=int(record["version"]))


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
        for name, record in relevant:
            job_id = str(UUID(str(record["job_id"])))
            current = rows.get(job_id)
            if current is not None and current.version >= int(record["version"]):
                continue  # redelivered
            if name == JobEvent.CREATED:
                status = "active" if record.get("next_fire_at") else "completed"
                rows[job_id] = _row(record, micros(record["at"]), status)
            elif current is None:
                raise MissingJob(f"{name} for job {job_id} without its JobCreated")
            elif name == JobEvent.UPDATED:
                updated = _row(record, current.created_at_us, current.status)
                if updated.tenant != current.tenant:
                    raise JobChangedTenant(f"JobUpdated v{updated.version} moves job {job_id} "
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
        if rows:
            self._store.write_job_rows(list(rows.values()))


def _check_missed(row: MissedFireTimesRow) -> None:
    check_time("at", row.recorded_at_us)
    check_time("first", row.first_us)
    check_time("last", row.last_us)
    check_unsigned("count", row.count, UINT64_MAX)
    check_unsigned("version", row.version, UINT64_MAX)
