"""PostgresOwnerState: the owner's view of Postgres, fenced by a per-partition epoch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from cronlog.commands.owner_ports import Claim, DueWindow, StoredRequest
from cronlog.commands.ports import EpochLost
from cronlog.infra.postgres.connection import StateStoreError, connect
from cronlog.projections.state import (
    JobRow,
    LoggedEvent,
    RunRow,
    apply_job_event,
    apply_run_event,
)


class StaleEpoch(EpochLost):
    """A newer owner has taken the partition: this process's Postgres writes are refused."""


TAKE_EPOCH = """
UPDATE partition_owners
SET epoch = epoch + 1, owner = %(owner)s, taken_at = now(), caught_up_member = NULL
WHERE partition = %(partition)s
RETURNING epoch, job_events_offset, run_events_offset
"""

CHECK_EPOCH_AND_ADVANCE = """
UPDATE partition_owners
SET job_events_offset = GREATEST(job_events_offset, %(job_offset)s),
    run_events_offset = GREATEST(run_events_offset, %(run_offset)s)
WHERE partition = %(partition)s AND epoch = %(epoch)s
RETURNING job_events_offset
"""

TAKE_EPOCHS = """
UPDATE partition_owners
SET epoch = epoch + 1, owner = %(owner)s, taken_at = now(), caught_up_member = NULL
WHERE partition = ANY(%(partitions)s)
RETURNING partition, epoch, job_events_offset, run_events_offset
"""

# Only where the epoch is still the one caught up at: a newer owner's claim stands.
MARK_CAUGHT_UP = """
UPDATE partition_owners AS p SET caught_up_member = %(member)s
FROM unnest(%(partitions)s::integer[], %(epochs)s::bigint[]) AS c(partition, epoch)
WHERE p.partition = c.partition AND p.epoch = c.epoch
"""

LOCK_EPOCH = "SELECT epoch FROM partition_owners WHERE partition = %(partition)s FOR UPDATE"

INSERT_JOB = """
INSERT INTO jobs (job_id, partition, tenant, name, status, version, spec, next_fire_at,
                  last_fired_at, created_at, updated_at)
VALUES (%(job_id)s, %(partition)s, %(tenant)s, %(name)s, %(status)s, %(version)s,
        %(spec_event)s, %(next_fire_at)s, %(last_fired_at)s, %(created_at)s, %(updated_at)s)
"""

SELECT_JOB = """
SELECT job_id, partition, tenant, name, status, version, spec, next_fire_at, last_fired_at,
       created_at, updated_at
FROM jobs
"""

# Jobs that may fire within the longer sparse horizon: those that never fired or whose last
# interval was at least sparse_gap (the owner then checks the interval after, Job.runs_apart).
DUE_JOBS = SELECT_JOB + """
WHERE partition = ANY(%(partitions)s) AND status = 'active'
  AND next_fire_at <= %(sparse_until)s
  AND (next_fire_at <= %(horizon)s OR last_fired_at IS NULL
       OR next_fire_at - last_fired_at >= %(sparse_gap)s)
  AND tenant <> ALL(%(excluded_tenants)s)
ORDER BY next_fire_at
LIMIT %(limit)s
"""

# All of a batch's new runs in one statement, one array per column: a row per statement
# (executemany) cost the owner more than the rest of its Postgres writes together. Arrays go
# in binary (%b): psycopg builds text arrays in Python, escaping every byte of a bytea (about
# 100 µs for a 150-byte event) and formatting every timestamp.
INSERT_RUNS = """
INSERT INTO runs (run_id, job_id, partition, scheduled_at, status, attempt, attempt_status,
                  version, not_before, state, updated_at, trigger)
SELECT * FROM unnest(%(run_id)b::uuid[], %(job_id)b::uuid[], %(partition)b::integer[],
                     %(scheduled_at)b::timestamptz[], %(status)b::text[], %(attempt)b::integer[],
                     %(attempt_status)b::text[], %(version)b::bigint[],
                     %(not_before)b::timestamptz[], %(scheduled_event)b::bytea[],
                     %(updated_at)b::timestamptz[], %(trigger)b::text[])
"""
RUN_INSERT_FIELDS = ("run_id", "job_id", "partition", "scheduled_at", "status", "attempt",
                     "attempt_status", "version", "not_before", "scheduled_event", "updated_at",
                     "trigger")

SELECT_RUN = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at
FROM runs WHERE run_id = %(run_id)s
"""

SELECT_RUNS = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at
FROM runs WHERE run_id = ANY(%(run_ids)b)
"""

SELECT_REQUEST = """
SELECT command, request_digest, job_version FROM requests
WHERE job_id = %(job_id)s AND request_id = %(request_id)s
"""

# The first request recorded with its digest (JobRequestApplied) keeps the id for good; a
# job event's bare request id only fills a gap, so the order they are applied in (and
# applying them again on catch-up or replay) never changes the outcome.
INSERT_REQUEST = """
INSERT INTO requests (job_id, request_id, partition, job_version, command, request_digest)
VALUES (%(job_id)s, %(request_id)s, %(partition)s, %(job_version)s, %(command)s,
        %(request_digest)s)
ON CONFLICT (job_id, request_id) DO UPDATE
SET job_version = EXCLUDED.job_version, command = EXCLUDED.command,
    request_digest = EXCLUDED.request_digest
WHERE requests.request_digest IS NULL AND EXCLUDED.request_digest IS NOT NULL
"""

_COLUMN_OF = {"spec_event": "spec"}


def _job_row(row: Sequence[Any]) -> JobRow:
    return JobRow(job_id=row[0], partition=row[1], tenant=row[2], name=row[3], status=row[4],
                  version=row[5], spec_event=bytes(row[6]), next_fire_at=row[7],
                  last_fired_at=row[8], created_at=row[9], updated_at=row[10])


def _run_row(row: Sequence[Any]) -> RunRow:
    return RunRow(run_id=row[0], job_id=row[1], partition=row[2], scheduled_at=row[3],
                  status=row[4], attempt=row[5], attempt_status=row[6], version=row[7],
                  not_before=row[8], scheduled_event=bytes(row[9]), updated_at=row[10])


# Updates of many rows in one statement: one array per column, NULL for "unchanged".
UPDATE_RUNS = """
UPDATE runs AS r SET
    status = COALESCE(v.status, r.status),
    attempt = COALESCE(v.attempt, r.attempt),
    attempt_status = COALESCE(v.attempt_status, r.attempt_status),
    not_before = COALESCE(v.not_before, r.not_before),
    version = v.version,
    updated_at = v.updated_at
FROM unnest(%(run_id)b::uuid[], %(status)b::text[], %(attempt)b::integer[],
            %(attempt_status)b::text[], %(not_before)b::timestamptz[], %(version)b::bigint[],
            %(updated_at)b::timestamptz[])
     AS v(run_id, status, attempt, attempt_status, not_before, version, updated_at)
WHERE r.run_id = v.run_id
RETURNING r.run_id
"""

# next_fire_at may be set to NULL (a completed job), so it comes with a flag.
UPDATE_JOBS = """
UPDATE jobs AS j SET
    status = COALESCE(v.status, j.status),
    name = COALESCE(v.name, j.name),
    spec = COALESCE(v.spec, j.spec),
    next_fire_at = CASE WHEN v.sets_next_fire_at THEN v.next_fire_at ELSE j.next_fire_at END,
    last_fired_at = COALESCE(v.last_fired_at, j.last_fired_at),
    version = v.version,
    updated_at = v.updated_at
FROM unnest(%(job_id)b::uuid[], %(status)b::text[], %(name)b::text[], %(spec)b::bytea[],
            %(sets_next_fire_at)b::boolean[], %(next_fire_at)b::timestamptz[],
            %(last_fired_at)b::timestamptz[], %(version)b::bigint[],
            %(updated_at)b::timestamptz[])
     AS v(job_id, status, name, spec, sets_next_fire_at, next_fire_at, last_fired_at, version,
          updated_at)
WHERE j.job_id = v.job_id
RETURNING j.job_id
"""

RUN_COLUMNS = ("status", "attempt", "attempt_status", "not_before")
JOB_COLUMNS = ("status", "name", "spec", "next_fire_at", "last_fired_at")


class _BatchingStateWriter:
    """Collects a batch's projection changes and writes them in a few statements.

    Several events of one aggregate in a batch fold into one row change (a run scheduled,
    dispatched and started in one owner cycle is one insert), and all updates of a table go
    in one statement, so the cost per event is a little Python, not a round trip.
    """

    def __init__(self) -> None:
        self.job_inserts: dict[UUID, JobRow] = {}
        self.run_inserts: dict[UUID, RunRow] = {}
        self.job_updates: dict[UUID, dict[str, Any]] = {}
        self.run_updates: dict[UUID, dict[str, Any]] = {}
        self.requests: dict[tuple[UUID, str], dict[str, Any]] = {}

    def insert_job(self, row: JobRow) -> None:
        self.job_inserts[row.job_id] = row

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        columns = {_COLUMN_OF.get(k, k): v for k, v in changes.items()}
        if job_id in self.job_inserts:
            fields = {("spec_event" if k == "spec" else k): v for k, v in columns.items()}
            self.job_inserts[job_id] = replace(self.job_inserts[job_id], version=version,
                                               updated_at=at, **fields)
            return
        update = self.job_updates.setdefault(job_id, {})
        update.update(columns, version=version, updated_at=at)

    def insert_run(self, row: RunRow) -> None:
        self.run_inserts[row.run_id] = row

    def update_run(self, run_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        if run_id in self.run_inserts:
            self.run_inserts[run_id] = replace(self.run_inserts[run_id], version=version,
                                               updated_at=at, **changes)
            return
        update = self.run_updates.setdefault(run_id, {})
        update.update(changes, version=version, updated_at=at)

    def record_request(self, request_id: str, partition: int, job_id: UUID,
                       job_version: int, command: str | None = None,
                       digest: str | None = None) -> None:
        key = (job_id, request_id)
        known = self.requests.get(key)
        if known is not None and (known["request_digest"] is not None or digest is None):
            return  # as INSERT_REQUEST decides it
        self.requests[key] = {"request_id": request_id, "partition": partition,
                              "job_id": job_id, "job_version": job_version,
                              "command": command, "request_digest": digest}

    def flush(self, cur: psycopg.Cursor[Any]) -> None:
        if self.job_inserts:
            cur.executemany(INSERT_JOB, [row.__dict__ for row in self.job_inserts.values()])
        if self.run_inserts:
            rows = list(self.run_inserts.values())
            cur.execute(INSERT_RUNS, {name: [getattr(row, name) for row in rows]
                                      for name in RUN_INSERT_FIELDS})
        if self.job_updates:
            self._update(cur, UPDATE_JOBS, "job_id", self.job_updates, JOB_COLUMNS, "jobs")
        if self.run_updates:
            self._update(cur, UPDATE_RUNS, "run_id", self.run_updates, RUN_COLUMNS, "runs")
        if self.requests:
            cur.executemany(INSERT_REQUEST, list(self.requests.values()))

    @staticmethod
    def _update(cur: psycopg.Cursor[Any], statement: str, key: str,
                updates: Mapping[UUID, Mapping[str, Any]], columns: Sequence[str],
                table: str) -> None:
        keys = list(updates)
        params: dict[str, list[Any]] = {key: keys}
        for column in (*columns, "version", "updated_at"):
            params[column] = [updates[k].get(column) for k in keys]
        if table == "jobs":
            params["sets_next_fire_at"] = [("next_fire_at" in updates[k]) for k in keys]
        cur.execute(statement, params)
        found = {row[0] for row in cur.fetchall()}
        missing = [k for k in keys if k not in found]
        if missing:
            raise StateStoreError(f"{table} rows {missing[:3]} missing for an update")


UNFINISHED_RUNS_OF_JOB = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at
FROM runs WHERE job_id = %(job_id)s AND status IN ('scheduled', 'running')
"""

IN_FLIGHT_RUNS = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at
FROM runs WHERE partition = ANY(%(partitions)s) AND status IN ('scheduled', 'running')
"""


class PostgresOwnerState:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            # Autocommit: a read is one round trip; apply() opens its own transaction.
            self._conn = connect(self._dsn, autocommit=True)
        return self._conn

    def _query(self, query: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        try:
            conn = self._connection()
            with conn.cursor() as cur:
                cur.execute(query, params)
                return cur.fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"Postgres: {exc}") from exc

    def _execute(self, statement: str, params: Mapping[str, Any]) -> None:
        try:
            self._connection().execute(statement.encode(), params)
        except psycopg.Error as exc:
            raise StateStoreError(f"Postgres: {exc}") from exc

    def take_epoch(self, partition: int, owner: str) -> Claim:
        rows = self._query(TAKE_EPOCH, {"owner": owner, "partition": partition})
        if not rows:
            raise StateStoreError(f"partition {partition} has no owner row; is the schema set up?")
        epoch, job_offset, run_offset = rows[0]
        return Claim(partition, int(epoch), int(job_offset), int(run_offset))

    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]:
        """A new epoch for each partition, in one round trip: a scheduler takes its share of
        1,024 partitions at once, not one by one."""
        rows = self._query(TAKE_EPOCHS, {"owner": owner, "partitions": list(partitions)})
        claims = {int(p): Claim(int(p), int(e), int(j), int(r)) for p, e, j, r in rows}
        missing = sorted(set(partitions) - set(claims))
        if missing:
            raise StateStoreError(f"partitions {missing[:5]} have no owner row; "
                                  "is the schema set up?")
        return [claims[p] for p in partitions]

    def apply(self, partition: int, epoch: int, job_events: Sequence[LoggedEvent],
              run_events: Sequence[LoggedEvent]) -> None:
        """Applies committed events and their offsets in one Postgres transaction, fenced."""
        if not job_events and not run_events:
            return
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(LOCK_EPOCH, {"partition": partition})
                current = cur.fetchone()
                if current is None or int(current[0]) != epoch:
                    raise StaleEpoch(f"partition {partition}: epoch {epoch} is no longer current")
                writer = _BatchingStateWriter()
                for event in job_events:
                    apply_job_event(writer, partition, event.name, event.record, event.raw)
                for event in run_events:
                    apply_run_event(writer, partition, event.name, event.record, event.raw)
                writer.flush(cur)
                cur.execute(CHECK_EPOCH_AND_ADVANCE, {
                    "partition": partition, "epoch": epoch,
                    "job_offset": max((e.offset + 1 for e in job_events), default=0),
                    "run_offset": max((e.offset + 1 for e in run_events), default=0),
                })
                if cur.fetchone() is None:
                    raise StaleEpoch(f"partition {partition}: epoch {epoch} is no longer current")
        except psycopg.Error as exc:
            raise StateStoreError(f"applying events of partition {partition}: {exc}") from exc

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[JobRow]:
        rows = self._query(DUE_JOBS, {
            "partitions": list(partitions), "horizon": window.until,
            "sparse_until": window.sparse_until, "sparse_gap": window.sparse_gap,
            "limit": limit, "excluded_tenants": list(excluded_tenants)})
        return [_job_row(r) for r in rows]

    def job(self, job_id: UUID) -> JobRow | None:
        rows = self._query(SELECT_JOB + " WHERE job_id = %(job_id)s", {"job_id": job_id})
        return _job_row(rows[0]) if rows else None

    def run(self, run_id: UUID) -> RunRow | None:
        rows = self._query(SELECT_RUN, {"run_id": run_id})
        return _run_row(rows[0]) if rows else None

    def in_flight_runs(self, partitions: Sequence[int]) -> list[RunRow]:
        return [_run_row(r) for r in self._query(IN_FLIGHT_RUNS,
                                                 {"partitions": list(partitions)})]

    def caught_up(self, epochs: Mapping[int, int], member: str) -> None:
        """Marks partitions caught up by the group member, where their epoch is unchanged."""
        if epochs:
            self._execute(MARK_CAUGHT_UP, {"member": member, "partitions": list(epochs),
                                           "epochs": list(epochs.values())})

    def jobs(self, job_ids: Sequence[UUID]) -> list[JobRow]:
        rows = self._query(SELECT_JOB + " WHERE job_id = ANY(%(job_ids)b)",
                           {"job_ids": list(job_ids)})
        return [_job_row(r) for r in rows]

    def runs(self, run_ids: Sequence[UUID]) -> list[RunRow]:
        return [_run_row(r) for r in self._query(SELECT_RUNS, {"run_ids": list(run_ids)})]

    def unfinished_runs(self, job_id: UUID) -> list[RunRow]:
        return [_run_row(r) for r in self._query(UNFINISHED_RUNS_OF_JOB, {"job_id": job_id})]

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        rows = self._query(SELECT_REQUEST, {"job_id": job_id, "request_id": request_id})
        if not rows:
            return None
        command, digest, job_version = rows[0]
        return StoredRequest(command=command, digest=digest, job_version=int(job_version))
