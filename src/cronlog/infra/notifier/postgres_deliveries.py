"""The notifier's state in PostgreSQL (notifications/ports.py DeliveryStore; the tables in
notifier_schema.sql) and its view of the tenants' channels (ChannelDirectory, the state
projection's `channels` table, with each webhook's signing secret derived when read)."""

from __future__ import annotations

import importlib.resources
import json
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from cronlog.domain.channel import MAX_CHANNELS_PER_TENANT, ChannelKind
from cronlog.domain.notify_rule import AlertKind
from cronlog.infra.postgres.bounded_pool import BoundedPool
from cronlog.infra.postgres.connection import StateStoreError, connect
from cronlog.notifications.model import (
    AlertMessage,
    AnyKind,
    AttemptOutcome,
    ChannelTarget,
    Delivery,
    TenantAlert,
)
from cronlog.notifications.ports import ChannelEntry
from cronlog.notifications.signing import derive_channel_secret

# Keeps the DDL of notifiers starting at once apart (connection.py's lock is the projection's).
SCHEMA_LOCK = 7253037
# Ended deliveries are kept this long, then pruned (a retry of an alert read again that late
# would be sent again: the log keeps alerts for less).
KEEP_ENDED = timedelta(days=7)

ADD = """
INSERT INTO notifier_deliveries (delivery_id, partition, tenant, channel_id, alert, attempt,
                                 due_at, first_at, status, updated_at)
VALUES (%(delivery_id)s, %(partition)s, %(tenant)s, %(channel_id)s, %(alert)s, %(attempt)s,
        %(due_at)s, %(first_at)s, 'pending', now())
ON CONFLICT (delivery_id) DO NOTHING
RETURNING delivery_id
"""

PENDING = """
SELECT partition, delivery_id, channel_id, alert, attempt, due_at, first_at
FROM notifier_deliveries
WHERE status = 'pending' AND partition = ANY(%(partitions)s)
ORDER BY partition, due_at
LIMIT %(limit)s
"""

ATTEMPTED = """
UPDATE notifier_deliveries
SET status = %(status)s, attempt = %(attempt)s, due_at = %(due_at)s,
    first_at = COALESCE(first_at, %(first_at)s), updated_at = now()
WHERE delivery_id = %(delivery_id)s
"""

PRUNE = """
DELETE FROM notifier_deliveries WHERE status <> 'pending' AND updated_at < %(before)s
"""

SET_FAILING = """
WITH before AS (SELECT EXISTS (SELECT 1 FROM notifier_failing_jobs WHERE job_id = %(job_id)s)
                AS was),
     marked AS (INSERT INTO notifier_failing_jobs (job_id, since)
                SELECT %(job_id)s, %(at)s WHERE %(failing)s
                ON CONFLICT (job_id) DO NOTHING),
     cleared AS (DELETE FROM notifier_failing_jobs
                 WHERE job_id = %(job_id)s AND NOT %(failing)s)
SELECT was FROM before
"""

_CHANNEL_COLUMNS = ("name, channel_id, tenant, kind, target, recipients, secret_rotation, "
                    "deleted")
NAMED_CHANNELS = f"""
SELECT {_CHANNEL_COLUMNS} FROM channels
WHERE tenant = %(tenant)s AND name = ANY(%(names)s) AND NOT deleted
"""
DEFAULT_CHANNELS = f"""
SELECT {_CHANNEL_COLUMNS} FROM channels
WHERE tenant = %(tenant)s AND is_default AND NOT deleted
ORDER BY name LIMIT %(limit)s
"""
CHANNEL_BY_ID = f"""
SELECT {_CHANNEL_COLUMNS} FROM channels WHERE channel_id = %(channel_id)s
"""

_KINDS: dict[str, AnyKind] = {**{k.value: k for k in AlertKind},
                              **{k.value: k for k in TenantAlert}}


def alert_json(alert: AlertMessage) -> str:
    return json.dumps({
        "alert_id": str(alert.alert_id), "tenant": alert.tenant, "kind": alert.kind.value,
        "job_id": str(alert.job_id), "job_name": alert.job_name,
        "run_id": None if alert.run_id is None else str(alert.run_id),
        "attempt": alert.attempt, "message": alert.message, "at": alert.at.isoformat(),
        "digest_count": alert.digest_count})


def alert_from_json(value: Any) -> AlertMessage:
    fields = value if isinstance(value, dict) else json.loads(value)
    return AlertMessage(
        alert_id=UUID(fields["alert_id"]), tenant=fields["tenant"],
        kind=_KINDS[fields["kind"]], job_id=UUID(fields["job_id"]),
        job_name=fields["job_name"],
        run_id=UUID(fields["run_id"]) if fields["run_id"] else None,
        attempt=fields["attempt"], message=fields["message"],
        at=datetime.fromisoformat(fields["at"]), digest_count=fields["digest_count"])


class PostgresDeliveries:
    """DeliveryStore on the notifier's tables; each call one statement, bounded in time."""

    def __init__(self, dsn: str) -> None:
        self._pool = BoundedPool(dsn)

    def close(self) -> None:
        self._pool.close()

    @staticmethod
    def ensure_schema(dsn: str) -> None:
        ddl = importlib.resources.files("cronlog.infra.notifier").joinpath(
            "notifier_schema.sql").read_text()
        with connect(dsn, autocommit=True) as conn:
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
                conn.execute(ddl)
            except psycopg.Error as exc:
                raise StateStoreError(f"notifier schema: {exc}") from exc

    def _run(self, query: str, params: Any, what: str) -> list[Any]:
        return self._pool.rows(query, params, what)

    def add(self, partition: int, deliveries: Sequence[Delivery]) -> set[UUID]:
        """One transaction for an alert's deliveries (at most its audience's channels)."""
        new: set[UUID] = set()
        try:
            with self._pool.pool.connection() as conn:
                for d in deliveries:
                    row = conn.execute(ADD, {
                        "delivery_id": d.delivery_id, "partition": partition,
                        "tenant": d.tenant, "channel_id": d.channel_id,
                        "alert": alert_json(d.alert), "attempt": d.attempt,
                        "due_at": d.due_at, "first_at": d.first_at}).fetchone()
                    if row is not None:
                        new.add(row[0])
        except psycopg.Error as exc:
            raise StateStoreError(f"keeping {len(deliveries)} deliveries: {exc}") from exc
        return new

    def pending(self, partitions: Collection[int], limit: int) -> list[tuple[int, Delivery]]:
        rows = self._run(PENDING, {"partitions": sorted(partitions), "limit": limit},
                         "reading pending deliveries")
        return [(partition, Delivery(delivery_id, channel_id, alert_from_json(alert), due_at,
                                     attempt, first_at))
                for partition, delivery_id, channel_id, alert, attempt, due_at, first_at
                in rows]

    def attempted(self, delivery: Delivery, outcome: AttemptOutcome,
                  next_attempt_at: datetime | None) -> None:
        retrying = outcome is AttemptOutcome.RETRYING
        self._run(ATTEMPTED, {
            "delivery_id": delivery.delivery_id,
            "status": "pending" if retrying else outcome.value,
            "attempt": delivery.attempt + 1 if retrying else delivery.attempt,
            "due_at": next_attempt_at or delivery.due_at, "first_at": delivery.first_at},
            f"recording an attempt of delivery {delivery.delivery_id}")

    def set_failing(self, job_id: UUID, failing: bool, at: datetime) -> bool:
        rows = self._run(SET_FAILING, {"job_id": job_id, "failing": failing, "at": at},
                         f"marking job {job_id}")
        return bool(rows and rows[0][0])

    def prune(self, now: datetime) -> None:
        self._run(PRUNE, {"before": now - KEEP_ENDED}, "pruning ended deliveries")


class PostgresChannelDirectory:
    """ChannelDirectory on the `channels` table; webhook secrets derived from the operator's
    key. Without the key a webhook channel has no secret, and the webhook sender fails its
    deliveries, not retried: cronlog never sends an unsigned webhook."""

    def __init__(self, dsn: str, signing_key: bytes | None) -> None:
        self._pool = BoundedPool(dsn)
        self._key = signing_key

    def close(self) -> None:
        self._pool.close()

    def _rows(self, query: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        return self._pool.rows(query, params, what)

    def _entry(self, row: tuple[Any, ...]) -> ChannelEntry:
        name, channel_id, tenant, kind, target, recipients, rotation, deleted = row
        kind = ChannelKind(kind)
        secrets = ((derive_channel_secret(self._key, channel_id, int(rotation)),)
                   if kind is ChannelKind.WEBHOOK and self._key is not None and not deleted
                   else ())
        return ChannelEntry(name, ChannelTarget(channel_id, tenant, kind, target or "",
                                                tuple(recipients or ()), secrets),
                            bool(deleted))

    def named(self, tenant: str, names: Sequence[str]) -> dict[str, ChannelEntry]:
        rows = self._rows(NAMED_CHANNELS, {"tenant": tenant, "names": list(names)},
                          f"reading channels of {tenant}")
        return {entry.name: entry for entry in map(self._entry, rows)}

    def defaults(self, tenant: str) -> list[ChannelEntry]:
        rows = self._rows(DEFAULT_CHANNELS, {"tenant": tenant,
                                             "limit": 5 * MAX_CHANNELS_PER_TENANT},
                          f"reading the default channels of {tenant}")
        return [self._entry(row) for row in rows]

    def by_id(self, channel_id: UUID) -> ChannelEntry | None:
        rows = self._rows(CHANNEL_BY_ID, {"channel_id": channel_id},
                          f"reading channel {channel_id}")
        return self._entry(rows[0]) if rows else None
