"""PostgresOwnerState: the owner's view of Postgres, fenced by a per-partition epoch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg

from cronlog.commands.owner.ports import Claim, DueWindow, EpochLost, PartitionEvents, StoredRequest
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.infra.postgres.calendar_sql import (
    CALENDAR_VERSIONS,
    RECENTLY_STALE_FOLLOWERS,
    SELECT_CALENDAR,
    SELECT_PUBLISHED_CALENDAR,
    STALE_FOLLOWERS,
)
from cronlog.infra.postgres.channel_sql import SELECT_CHANNEL
from cronlog.infra.postgres.connection import StateStoreError, connect
from cronlog.infra.postgres.dependency_sql import (
    JOBS_WITH_DEPENDENTS,
    SELECT_SETTLED,
    SELECT_WAITING_ENDS,
    WAITING_FAN_INS,
)
from cronlog.infra.postgres.owner_sql import (
    CHECK_EPOCH_AND_ADVANCE,
    CHECK_EPOCHS_AND_ADVANCE,
    DUE_JOBS,
    IN_FLIGHT_RUNS,
    LOCK_EPOCH,
    LOCK_EPOCHS,
    MARK_CAUGHT_UP,
    SELECT_JOB,
    SELECT_REQUEST,
    SELECT_REQUESTS,
    SELECT_RUN,
    SELECT_RUNS,
    TAKE_EPOCH,
    TAKE_EPOCHS,
    UNFINISHED_RUNS_OF_JOB,
    job_row,
    run_row,
)
from cronlog.infra.postgres.state_writer import BatchingStateWriter
from cronlog.projections.state import (
    JobRow,
    LoggedEvent,
    RunRow,
    apply_job_event,
    apply_run_event,
)

# Pending followers of a calendar (issue 33): of the jobs named, those this owner still owns.
FOLLOWING_JOBS = SELECT_JOB + """
WHERE job_id = ANY(%(job_ids)b) AND partition = ANY(%(partitions)s)
"""


class StaleEpoch(EpochLost):
    """A newer owner has taken the partition: this process's Postgres writes are refused."""


class PostgresOwnerState:
    def __init__(self, dsn: str, layout: PartitionLayout | None = None) -> None:
        """layout: how the Kafka partitions the events are read from carry the logical
        partitions the rows are keyed by; None is the identity (each its own)."""
        self._dsn = dsn
        self._layout = layout
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
        claims = {int(p): Claim(int(p), int(e), int(j), int(r), str(o) if o else None)
                  for p, e, j, r, o in rows}
        missing = sorted(set(partitions) - set(claims))
        if missing:
            raise StateStoreError(f"partitions {missing[:5]} have no owner row; "
                                  "is the schema set up?")
        return [claims[p] for p in partitions]

    def _logical(self, partition: int, event: LoggedEvent) -> int:
        """The logical partition of an event read from Kafka partition `partition`."""
        if self._layout is None or self._layout.is_identity:
            return partition
        return self._layout.logical_of_message(partition, getattr(event, "key", None))

    def apply(self, partition: int, epoch: int, job_events: Sequence[LoggedEvent],
              run_events: Sequence[LoggedEvent], runs_before_the_log: bool = False) -> None:
        """Applies committed events of Kafka partition `partition` and their offsets in one
        Postgres transaction, fenced by the epoch of the partition's anchor row (the logical
        partition of the same number, docs/partitions.md): ownership moves by Kafka
        partition and a take bumps the epochs of all its logical partitions in one
        statement, so the anchor's epoch changes whenever any of theirs does, and the fence
        costs one row whatever the number of logical partitions. Each row written carries
        its event's logical partition.
        runs_before_the_log: see BatchingStateWriter (a catch-up on a trimmed log)."""
        if not job_events and not run_events:
            return
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(LOCK_EPOCH, {"partition": partition})
                current = cur.fetchone()
                if current is None or int(current[0]) != epoch:
                    raise StaleEpoch(f"partition {partition}: epoch {epoch} is no longer current")
                writer = BatchingStateWriter(runs_before_the_log)
                for event in job_events:
                    apply_job_event(writer, self._logical(partition, event), event.name,
                                    event.record, event.raw)
                for event in run_events:
                    apply_run_event(writer, self._logical(partition, event), event.name,
                                    event.record, event.raw)
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

    def apply_all(self, batches: Sequence[PartitionEvents]) -> None:
        """Applies the committed events of several Kafka partitions, and their offsets, in
        one Postgres transaction, fenced by each one's anchor epoch (apply): all, or none
        when one epoch is no longer current (StaleEpoch)."""
        batches = [b for b in batches if b.job_events or b.run_events]
        if not batches:
            return
        if len(batches) == 1:
            only = batches[0]
            self.apply(only.partition, only.epoch, only.job_events, only.run_events)
            return
        partitions = [b.partition for b in batches]
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(LOCK_EPOCHS, {"partitions": partitions})
                current = {int(p): int(e) for p, e in cur.fetchall()}
                stale = sorted(b.partition for b in batches
                               if current.get(b.partition) != b.epoch)
                if stale:
                    raise StaleEpoch(f"partitions {stale[:5]}: their epochs are no longer "
                                     "current")
                writer = BatchingStateWriter()
                for b in batches:
                    for event in b.job_events:
                        apply_job_event(writer, self._logical(b.partition, event), event.name,
                                        event.record, event.raw)
                    for event in b.run_events:
                        apply_run_event(writer, self._logical(b.partition, event), event.name,
                                        event.record, event.raw)
                writer.flush(cur)
                cur.execute(CHECK_EPOCHS_AND_ADVANCE, {
                    "partitions": partitions,
                    "epochs": [b.epoch for b in batches],
                    "job_offsets": [max((e.offset + 1 for e in b.job_events), default=0)
                                    for b in batches],
                    "run_offsets": [max((e.offset + 1 for e in b.run_events), default=0)
                                    for b in batches],
                })
                if len(cur.fetchall()) != len(batches):
                    raise StaleEpoch(f"partitions {partitions[:5]}...: an epoch changed "
                                     "while applying")
        except psycopg.Error as exc:
            raise StateStoreError(f"applying events of {len(batches)} partitions: "
                                  f"{exc}") from exc

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[JobRow]:
        rows = self._query(DUE_JOBS, {
            "partitions": list(partitions), "horizon": window.until,
            "sparse_until": window.sparse_until, "sparse_gap": window.sparse_gap,
            "limit": limit, "excluded_tenants": list(excluded_tenants)})
        return [job_row(r) for r in rows]

    def job(self, job_id: UUID) -> JobRow | None:
        rows = self._query(SELECT_JOB + " WHERE job_id = %(job_id)s", {"job_id": job_id})
        return job_row(rows[0]) if rows else None

    def run(self, run_id: UUID) -> RunRow | None:
        rows = self._query(SELECT_RUN, {"run_id": run_id})
        return run_row(rows[0]) if rows else None

    def in_flight_runs(self, partitions: Sequence[int]) -> list[RunRow]:
        return [run_row(r) for r in self._query(IN_FLIGHT_RUNS,
                                                 {"partitions": list(partitions)})]

    def caught_up(self, epochs: Mapping[int, int], member: str) -> None:
        """Marks partitions caught up by the group member, where their epoch is unchanged."""
        if epochs:
            self._execute(MARK_CAUGHT_UP, {"member": member, "partitions": list(epochs),
                                           "epochs": list(epochs.values())})

    def jobs(self, job_ids: Sequence[UUID]) -> list[JobRow]:
        rows = self._query(SELECT_JOB + " WHERE job_id = ANY(%(job_ids)b)",
                           {"job_ids": list(job_ids)})
        return [job_row(r) for r in rows]

    def runs(self, run_ids: Sequence[UUID]) -> list[RunRow]:
        return [run_row(r) for r in self._query(SELECT_RUNS, {"run_ids": list(run_ids)})]

    def unfinished_runs(self, job_id: UUID) -> list[RunRow]:
        return [run_row(r) for r in self._query(UNFINISHED_RUNS_OF_JOB, {"job_id": job_id})]

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        rows = self._query(SELECT_REQUEST, {"job_id": job_id, "request_id": request_id})
        if not rows:
            return None
        command, digest, job_version = rows[0]
        return StoredRequest(command=command, digest=digest, job_version=int(job_version))

    def requests(self, keys: Sequence[tuple[UUID, str]]
                 ) -> dict[tuple[UUID, str], StoredRequest]:
        rows = self._query(SELECT_REQUESTS, {"job_ids": [k[0] for k in keys],
                                             "request_ids": [k[1] for k in keys]})
        return {(job_id, request_id): StoredRequest(command=command, digest=digest,
                                                    job_version=int(version))
                for job_id, request_id, command, digest, version in rows}

    def calendar(self, calendar_id: UUID) -> tuple[Any, ...] | None:
        """(calendar_id, tenant, name, version, description, exclusions, created_at,
        updated_at, subscriber job ids) of the calendar (issue 20)."""
        rows = self._query(SELECT_CALENDAR, {"calendar_id": calendar_id})
        return rows[0] if rows else None

    def channel(self, channel_id: UUID) -> tuple[Any, ...] | None:
        """The channels row (channel_sql.COLUMNS) of the channel (issue 37)."""
        rows = self._query(SELECT_CHANNEL, {"channel_id": channel_id})
        return rows[0] if rows else None

    def published_calendar(self, calendar_id: UUID) -> tuple[Any, ...] | None:
        """(name, version, exclusions) of the calendar, without its subscribers."""
        rows = self._query(SELECT_PUBLISHED_CALENDAR, {"calendar_id": calendar_id})
        return rows[0] if rows else None

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        rows = self._query(CALENDAR_VERSIONS, {"calendar_ids": list(calendar_ids)})
        return {calendar: int(version) for calendar, version in rows}

    def following_jobs(self, job_ids: Sequence[UUID], partitions: Sequence[int]
                       ) -> list[JobRow]:
        if not job_ids:
            return []
        rows = self._query(FOLLOWING_JOBS,
                           {"job_ids": list(job_ids), "partitions": list(partitions)})
        return [job_row(r) for r in rows]

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        if within is None:
            rows = self._query(STALE_FOLLOWERS, {"partitions": list(partitions)})
        else:
            rows = self._query(RECENTLY_STALE_FOLLOWERS,
                               {"partitions": list(partitions), "within": within})
        return [(job_id, calendar, int(version)) for job_id, calendar, version in rows]

    # -- dependencies (issue 16) -----------------------------------------------------------
    def waiting_ends(self, job_id: UUID) -> list[tuple[Any, ...]]:
        return self._query(SELECT_WAITING_ENDS, {"job_id": job_id})

    def settled_slots(self, job_id: UUID) -> list[tuple[Any, ...]]:
        return self._query(SELECT_SETTLED, {"job_id": job_id})

    def waiting_fan_ins(self, partitions: Sequence[int]) -> list[tuple[int, UUID, datetime]]:
        return [(int(p), j, t) for p, j, t in
                self._query(WAITING_FAN_INS, {"partitions": list(partitions)})]

    def jobs_with_dependents(self, partitions: Sequence[int]) -> list[tuple[int, UUID]]:
        return [(int(p), j) for p, j in
                self._query(JOBS_WITH_DEPENDENTS, {"partitions": list(partitions)})]
