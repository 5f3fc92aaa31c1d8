"""The job_listing table (schema.sql): what ListJobs filters by, written with the jobs rows
by the state writer, and filled once from the specs of jobs older than the table."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

import psycopg

from cronlog.domain.catalogue import SPEC_EVENTS
from cronlog.infra.avro.codec import AvroCodec, CodecError
from cronlog.projections.state import JobRow

log = logging.getLogger(__name__)

INSERT_LISTING = """
INSERT INTO job_listing (job_id, tenant, created_at, status, name, queue, labels)
VALUES (%(job_id)s, %(tenant)s, %(created_at)s, %(status)s, %(name)s, %(queue)s,
        %(labels)s::jsonb)
ON CONFLICT (job_id) DO NOTHING
"""

# New jobs' rows in one statement (the owner's apply of a CreateJobs batch).
INSERT_LISTINGS = """
INSERT INTO job_listing (job_id, tenant, created_at, status, name, queue, labels)
SELECT job_id, tenant, created_at, status, name, queue, labels::jsonb
FROM unnest(%(job_id)b::uuid[], %(tenant)b::text[], %(created_at)b::timestamptz[],
            %(status)b::text[], %(name)b::text[], %(queue)b::text[], %(labels)b::text[])
     AS v(job_id, tenant, created_at, status, name, queue, labels)
ON CONFLICT (job_id) DO NOTHING
"""
LISTING_FIELDS = ("job_id", "tenant", "created_at", "status", "name", "queue", "labels")

# A job without a row here is one from before the table, not filled yet: its update touches
# nothing, and the fill (which locks the job's row) reads the job as this update left it.
UPDATE_LISTING = """
UPDATE job_listing AS l SET
    status = COALESCE(v.status, l.status),
    name = COALESCE(v.name, l.name),
    queue = COALESCE(v.queue, l.queue),
    labels = COALESCE(v.labels::jsonb, l.labels)
FROM unnest(%(job_id)b::uuid[], %(status)b::text[], %(name)b::text[], %(queue)b::text[],
            %(labels)b::text[])
     AS v(job_id, status, name, queue, labels)
WHERE l.job_id = v.job_id
"""

# The changes of a job update that job_listing keeps.
LISTED = ("status", "name", "queue", "labels")

# Jobs older than the table, a batch at a time. SKIP LOCKED: a row the owner is writing is
# left for a later round rather than waited for (waiting could deadlock with the owner's
# batch update, which locks its rows in another order).
UNLISTED_JOBS = """
SELECT j.job_id, j.tenant, j.created_at, j.status, j.name, j.spec FROM jobs AS j
WHERE NOT EXISTS (SELECT 1 FROM job_listing AS l WHERE l.job_id = j.job_id)
ORDER BY j.job_id
LIMIT %(limit)s
FOR UPDATE OF j SKIP LOCKED
"""
COUNT_UNLISTED = """
SELECT count(*) FROM jobs AS j
WHERE NOT EXISTS (SELECT 1 FROM job_listing AS l WHERE l.job_id = j.job_id)
"""
FILL_BATCH = 500
FILL_ROUNDS_WHILE_LOCKED = 20


def _no_nul(text: str) -> str:
    return text.replace("\x00", "\ufffd")


def labels_json(labels: Iterable[tuple[str, str]] | Mapping[str, str]) -> str:
    """The labels as jsonb takes them. jsonb refuses the character U+0000, which a label
    may hold: it is listed as U+FFFD (a selector cannot hold it), so that such a job never
    fails the projection (invariant 9)."""
    pairs = labels.items() if isinstance(labels, Mapping) else labels
    return _LABELS_JSON.encode({_no_nul(k): _no_nul(v) for k, v in pairs})


# json.dumps with sort_keys builds an encoder per call (a few microseconds of every job
# created); this one keeps no state between calls and writes the same text.
_LABELS_JSON = json.JSONEncoder(sort_keys=True)


def listing_params(row: JobRow) -> dict[str, Any]:
    return {"job_id": row.job_id, "tenant": row.tenant, "created_at": row.created_at,
            "status": row.status, "name": row.name, "queue": row.queue,
            "labels": labels_json(row.labels)}


def update_params(updates: Mapping[UUID, Mapping[str, Any]]) -> dict[str, list[Any]] | None:
    """UPDATE_LISTING's parameters for the job updates that change a listed column, or None
    when none does (a fire changes none)."""
    changed = [k for k, change in updates.items() if any(c in change for c in LISTED)]
    if not changed:
        return None
    params: dict[str, list[Any]] = {"job_id": changed}
    for column in ("status", "name", "queue"):
        params[column] = [updates[k].get(column) for k in changed]
    params["labels"] = [labels_json(updates[k]["labels"]) if "labels" in updates[k] else None
                        for k in changed]
    return params


def _spec_fields(codec: AvroCodec, job_id: UUID, spec_event: bytes) -> tuple[str, str] | None:
    try:
        name, record = codec.decode(spec_event)
    except CodecError as exc:
        log.warning("job %s: its stored spec does not decode (%s); it is listed only "
                    "without queue and label filters", job_id, exc)
        return None
    if name not in SPEC_EVENTS:
        log.warning("job %s: its stored spec is a %s", job_id, name)
        return None
    spec = record["spec"]
    return str(spec["queue"]), labels_json({str(k): str(v)
                                            for k, v in (spec.get("labels") or {}).items()})


def fill_missing(conn: psycopg.Connection[Any], codec: AvroCodec | None = None) -> int:
    """Lists the jobs that have no job_listing row (a database from before the table).
    Returns how many it listed. Safe while owners write: each batch locks its jobs rows."""
    codec = codec or AvroCodec()
    listed = 0
    locked_rounds = 0
    while True:
        with conn.transaction():
            rows = conn.execute(UNLISTED_JOBS, {"limit": FILL_BATCH}).fetchall()
            params = []
            for job_id, tenant, created_at, status, name, spec in rows:
                queue, labels = _spec_fields(codec, job_id, bytes(spec)) or ("", "{}")
                params.append({"job_id": job_id, "tenant": tenant, "created_at": created_at,
                               "status": status, "name": name, "queue": queue,
                               "labels": labels})
            if params:
                conn.cursor().executemany(INSERT_LISTING, params)
        listed += len(rows)
        if rows:
            continue
        left = conn.execute(COUNT_UNLISTED).fetchone()
        if not left or not left[0]:
            break
        locked_rounds += 1
        if locked_rounds >= FILL_ROUNDS_WHILE_LOCKED:
            log.warning("%d jobs not listed yet (their rows stayed locked); the next start "
                        "lists them", left[0])
            break
        time.sleep(0.05)
    if listed:
        log.info("listed %d jobs from before job_listing", listed)
    return listed
