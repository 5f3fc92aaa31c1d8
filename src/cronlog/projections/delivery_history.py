"""AlertDeliveryAttempted records (the notifier's, on `<prefix>alert-deliveries`) -> one
ClickHouse row per attempt of a delivery (alert_deliveries), for `ListAlertDeliveries`,
`cronlog alerts list`, the console's job page and the tenant's analysts.

Each record becomes its row as it is: a record projected twice (a redelivered batch) writes
the same row, which the table collapses, and readers take (delivery_id, attempt) as the key
for an attempt the notifier recorded twice (ports.DeliveryLog)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from cronlog.domain.catalogue import AlertDelivery
from cronlog.projections.history import (
    UINT32_MAX,
    UnstorableEvent,
    check_time,
    check_unsigned,
    micros,
)

# An alert's message is not bounded where it is raised; its row keeps this much of it, so
# a page of 100 rows stays far below a gRPC message (error is at most 500 already).
MAX_MESSAGE_CHARS = 1000
OUTCOMES = frozenset({"delivered", "retrying", "failed"})
LARGEST_LATENCY_MS = 2**63 - 1


class UnknownDeliveryRecord(ValueError):
    """A record on the alert-deliveries topic the projection does not know: it stops rather
    than skip it (the loop then sets it aside, invariant 9)."""


@dataclass(frozen=True)
class AlertDeliveryRow:
    sent_at_us: int
    tenant: str
    job_id: str
    job_name: str
    delivery_id: str
    attempt: int
    alert_id: str
    kind: str
    run_id: str  # "" for an alert about the job, or a digest
    run_attempt: int  # 0 when the alert is about no attempt
    digest_count: int
    message: str
    channel_id: str
    channel_name: str
    channel_kind: str
    outcome: str
    status_code: int
    latency_ms: int
    error: str
    next_attempt_at_us: int  # 0 unless retrying


@dataclass(frozen=True)
class DeliveryFilter:
    """What a page of the delivery history is of: one tenant's attempts (always), of one
    job, to one channel (by name), or with one outcome."""

    tenant: str
    job_id: str | None = None
    channel_name: str | None = None
    outcome: str | None = None


class DeliveryHistoryStore(Protocol):
    def write_delivery_rows(self, rows: Sequence[AlertDeliveryRow]) -> None: ...


def _time(field: str, value: datetime) -> int:
    us = micros(value)
    check_time(field, us)
    return us


def delivery_row(record: Mapping[str, Any]) -> AlertDeliveryRow:
    """The row of one AlertDeliveryAttempted record; UnstorableEvent for a value the table
    cannot hold (the record is set aside whole, before anything of its batch is written)."""
    for field in ("attempt", "digest_count", "status_code"):
        check_unsigned(field, record[field], UINT32_MAX)
    if record["run_attempt"] is not None:
        check_unsigned("run_attempt", record["run_attempt"], UINT32_MAX)
    check_unsigned("latency_ms", record["latency_ms"], LARGEST_LATENCY_MS)
    if record["outcome"] not in OUTCOMES:
        raise UnstorableEvent(f"outcome {record['outcome']!r} is not one of "
                              f"{', '.join(sorted(OUTCOMES))}")
    next_at = record["next_attempt_at"]
    return AlertDeliveryRow(
        sent_at_us=_time("sent_at", record["sent_at"]), tenant=record["tenant"],
        job_id=str(record["job_id"]), job_name=record["job_name"],
        delivery_id=str(record["delivery_id"]), attempt=record["attempt"],
        alert_id=str(record["alert_id"]), kind=record["kind"],
        run_id=str(record["run_id"]) if record["run_id"] is not None else "",
        run_attempt=record["run_attempt"] or 0, digest_count=record["digest_count"],
        message=record["message"][:MAX_MESSAGE_CHARS], channel_id=str(record["channel_id"]),
        channel_name=record["channel_name"], channel_kind=record["channel_kind"],
        outcome=record["outcome"], status_code=record["status_code"],
        latency_ms=record["latency_ms"], error=record["error"],
        next_attempt_at_us=_time("next_attempt_at", next_at) if next_at is not None else 0)


class DeliveryHistoryProjector:
    """The history loop's BatchProjector for the alert-deliveries topic: one insert per
    batch, after every record of it was mapped (so one bad record writes nothing)."""

    def __init__(self, store: DeliveryHistoryStore) -> None:
        self._store = store

    def apply_batch(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        rows = []
        for name, record in events:
            if name != AlertDelivery.ATTEMPTED:
                raise UnknownDeliveryRecord(f"{name} is not a record of the alert-deliveries "
                                            "topic")
            rows.append(delivery_row(record))
        if rows:
            self._store.write_delivery_rows(rows)
