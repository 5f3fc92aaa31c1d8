"""The SQL the owner's Postgres adapter runs, and how its rows become projection rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cronlog.infra.postgres.calendar_sql import applied_from_json
from cronlog.projections.state import JobRow, RunRow

# A partition's first epoch in a database is the clock in milliseconds, not 1: a database
# replaced by an empty one (docs/recovery.md) must not hand out epochs an owner may still
# hold from the lost one, or a frozen owner waking up would pass the fence and write its
# stale catch-up over the rebuilt state. Later takes add one, as invariant 2 says.
NEXT_EPOCH = ("CASE WHEN epoch = 0 THEN (extract(epoch FROM clock_timestamp()) * 1000)::bigint "
              "ELSE epoch + 1 END")

TAKE_EPOCH = """
UPDATE partition_owners
SET epoch = """ + NEXT_EPOCH + """, owner = %(owner)s, taken_at = now(), caught_up_member = NULL
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

# Also who held each partition before: a takeover fences an earlier owner that left
# without handing over (infra/kafka/departed_owners.py). Rows locked in partition order.
TAKE_EPOCHS = """
UPDATE partition_owners AS p
SET epoch = """ + NEXT_EPOCH + """, owner = %(owner)s, taken_at = now(), caught_up_member = NULL
FROM (SELECT partition, owner FROM partition_owners WHERE partition = ANY(%(partitions)s)
      ORDER BY partition FOR UPDATE) AS earlier
WHERE p.partition = earlier.partition
RETURNING p.partition, p.epoch, p.job_events_offset, p.run_events_offset, earlier.owner
"""

# Only where the epoch is still the one caught up at: a newer owner's claim stands.
MARK_CAUGHT_UP = """
UPDATE partition_owners AS p SET caught_up_member = %(member)s
FROM unnest(%(partitions)s::integer[], %(epochs)s::bigint[]) AS c(partition, epoch)
WHERE p.partition = c.partition AND p.epoch = c.epoch
"""

LOCK_EPOCH = "SELECT epoch FROM partition_owners WHERE partition = %(partition)s FOR UPDATE"

# In partition order, as every writer that locks several takes them, so two never wait on
# each other in a cycle.
LOCK_EPOCHS = """
SELECT partition, epoch FROM partition_owners WHERE partition = ANY(%(partitions)s)
ORDER BY partition FOR UPDATE
"""

CHECK_EPOCHS_AND_ADVANCE = """
UPDATE partition_owners AS o
SET job_events_offset = GREATEST(o.job_events_offset, a.job_offset),
    run_events_offset = GREATEST(o.run_events_offset, a.run_offset)
FROM unnest(%(partitions)s::integer[], %(epochs)s::bigint[], %(job_offsets)s::bigint[],
            %(run_offsets)s::bigint[]) AS a(partition, epoch, job_offset, run_offset)
WHERE o.partition = a.partition AND o.epoch = a.epoch
RETURNING o.partition
"""

# A batch's new jobs in one statement (a CreateJobs brings hundreds an owner cycle): one
# round of the protocol, not a Bind and Execute per row.
INSERT_JOBS = """
INSERT INTO jobs (job_id, partition, tenant, name, status, version, spec, next_fire_at,
                  last_fired_at, created_at, updated_at, revision, spec_version)
SELECT * FROM unnest(%(job_id)b::uuid[], %(partition)b::integer[], %(tenant)b::text[],
                     %(name)b::text[], %(status)b::text[], %(version)b::bigint[],
                     %(spec_event)b::bytea[], %(next_fire_at)b::timestamptz[],
                     %(last_fired_at)b::timestamptz[], %(created_at)b::timestamptz[],
                     %(updated_at)b::timestamptz[], %(revision)b::bigint[],
                     %(spec_version)b::bigint[])
"""
JOB_INSERT_FIELDS = ("job_id", "partition", "tenant", "name", "status", "version",
                     "spec_event", "next_fire_at", "last_fired_at", "created_at", "updated_at",
                     "revision", "spec_version")

# A row written before jobs had a revision (issue 35) shows its version until its spec or
# status next changes.
REVISION = "COALESCE(revision, version)"
SELECT_JOB = f"""
SELECT job_id, partition, tenant, name, status, version, spec, next_fire_at, last_fired_at,
       created_at, updated_at, dependents, calendar, {REVISION}
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
                  version, not_before, state, updated_at, trigger, attempt_base)
SELECT * FROM unnest(%(run_id)b::uuid[], %(job_id)b::uuid[], %(partition)b::integer[],
                     %(scheduled_at)b::timestamptz[], %(status)b::text[], %(attempt)b::integer[],
                     %(attempt_status)b::text[], %(version)b::bigint[],
                     %(not_before)b::timestamptz[], %(scheduled_event)b::bytea[],
                     %(updated_at)b::timestamptz[], %(trigger)b::text[],
                     %(attempt_base)b::integer[])
"""
RUN_INSERT_FIELDS = ("run_id", "job_id", "partition", "scheduled_at", "status", "attempt",
                     "attempt_status", "version", "not_before", "scheduled_event", "updated_at",
                     "trigger", "attempt_base")

SELECT_RUN = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at, attempt_base
FROM runs WHERE run_id = %(run_id)s
"""

SELECT_RUNS = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at, attempt_base
FROM runs WHERE run_id = ANY(%(run_ids)b)
"""

SELECT_REQUEST = """
SELECT command, request_digest, job_version FROM requests
WHERE job_id = %(job_id)s AND request_id = %(request_id)s
"""

# The requests of a cycle's commands in one read (a CreateJobs batch brings hundreds).
SELECT_REQUESTS = """
SELECT r.job_id, r.request_id, r.command, r.request_digest, r.job_version
FROM requests AS r
JOIN unnest(%(job_ids)s::uuid[], %(request_ids)s::text[]) AS k(job_id, request_id)
  ON r.job_id = k.job_id AND r.request_id = k.request_id
"""

# The first request recorded with its digest (JobRequestApplied) keeps the id for good; a
# job event's bare request id only fills a gap, so the order they are applied in (and
# applying them again on catch-up or replay) never changes the outcome.
# No two rows of one statement share a key (the writer keeps one per (job, request id)).
INSERT_REQUESTS = """
INSERT INTO requests (job_id, request_id, partition, job_version, command, request_digest)
SELECT * FROM unnest(%(job_id)b::uuid[], %(request_id)b::text[], %(partition)b::integer[],
                     %(job_version)b::bigint[], %(command)b::text[],
                     %(request_digest)b::text[])
ON CONFLICT (job_id, request_id) DO UPDATE
SET job_version = EXCLUDED.job_version, command = EXCLUDED.command,
    request_digest = EXCLUDED.request_digest
WHERE requests.request_digest IS NULL AND EXCLUDED.request_digest IS NOT NULL
"""
REQUEST_FIELDS = ("job_id", "request_id", "partition", "job_version", "command",
                  "request_digest")

COLUMN_OF = {"spec_event": "spec"}


def job_row(row: Sequence[Any]) -> JobRow:
    return JobRow(job_id=row[0], partition=row[1], tenant=row[2], name=row[3], status=row[4],
                  version=row[5], spec_event=bytes(row[6]), next_fire_at=row[7],
                  last_fired_at=row[8], created_at=row[9], updated_at=row[10],
                  dependents=tuple(row[11] or ()) if len(row) > 11 else (),
                  calendar=applied_from_json(row[12]) if len(row) > 12 else None,
                  revision=row[13] if len(row) > 13 else row[5])


def run_row(row: Sequence[Any]) -> RunRow:
    return RunRow(run_id=row[0], job_id=row[1], partition=row[2], scheduled_at=row[3],
                  status=row[4], attempt=row[5], attempt_status=row[6], version=row[7],
                  not_before=row[8], scheduled_event=bytes(row[9]), updated_at=row[10],
                  attempt_base=row[11] if len(row) > 11 else 0)


# Updates of many rows in one statement: one array per column, NULL for "unchanged".
UPDATE_RUNS = """
UPDATE runs AS r SET
    status = COALESCE(v.status, r.status),
    attempt = COALESCE(v.attempt, r.attempt),
    attempt_status = COALESCE(v.attempt_status, r.attempt_status),
    not_before = COALESCE(v.not_before, r.not_before),
    attempt_base = COALESCE(v.attempt_base, r.attempt_base),
    version = v.version,
    updated_at = v.updated_at
FROM unnest(%(run_id)b::uuid[], %(status)b::text[], %(attempt)b::integer[],
            %(attempt_status)b::text[], %(not_before)b::timestamptz[],
            %(attempt_base)b::integer[], %(version)b::bigint[], %(updated_at)b::timestamptz[])
     AS v(run_id, status, attempt, attempt_status, not_before, attempt_base, version,
          updated_at)
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
    revision = COALESCE(v.revision, j.revision),
    spec_version = COALESCE(v.spec_version, j.spec_version),
    version = v.version,
    updated_at = v.updated_at
FROM unnest(%(job_id)b::uuid[], %(status)b::text[], %(name)b::text[], %(spec)b::bytea[],
            %(sets_next_fire_at)b::boolean[], %(next_fire_at)b::timestamptz[],
            %(last_fired_at)b::timestamptz[], %(revision)b::bigint[],
            %(spec_version)b::bigint[], %(version)b::bigint[], %(updated_at)b::timestamptz[])
     AS v(job_id, status, name, spec, sets_next_fire_at, next_fire_at, last_fired_at,
          revision, spec_version, version, updated_at)
WHERE j.job_id = v.job_id
RETURNING j.job_id
"""

RUN_COLUMNS = ("status", "attempt", "attempt_status", "not_before", "attempt_base")
JOB_COLUMNS = ("status", "name", "spec", "next_fire_at", "last_fired_at", "revision",
               "spec_version")


UNFINISHED_RUNS_OF_JOB = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at, attempt_base
FROM runs WHERE job_id = %(job_id)s AND status IN ('scheduled', 'running')
"""

IN_FLIGHT_RUNS = """
SELECT run_id, job_id, partition, scheduled_at, status, attempt, attempt_status, version,
       not_before, state, updated_at, attempt_base
FROM runs WHERE partition = ANY(%(partitions)s) AND status IN ('scheduled', 'running')
"""
