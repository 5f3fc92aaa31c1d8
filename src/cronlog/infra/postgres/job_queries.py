"""PostgresJobQueries: the read side of jobs for the api (GetJob, ListJobs, the upstreams of
a dependent job)."""

from __future__ import annotations

import base64
import json
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool

from cronlog.commands.api.ports import DeadLetter
from cronlog.domain.catalogue import SPEC_EVENTS
from cronlog.infra.avro.codec import AvroCodec, CodecError
from cronlog.infra.avro.event_mapping import spec_from_record
from cronlog.infra.postgres.byte_pages import PAGE_BYTES, byte_bounded, configure_reads
from cronlog.infra.postgres.connection import StateStoreError
from cronlog.infra.postgres.owner_sql import REVISION, SELECT_JOB, SELECT_RUN, job_row, run_row
from cronlog.projections.state import JobRow, RunRow

GET_JOB = SELECT_JOB + " WHERE job_id = %(job_id)s"

# Keyset pagination on (created_at, job_id): stable while jobs are added. One statement per
# case, without optional parameters ("%(x)s IS NULL OR ..."): psycopg prepares a statement
# it runs often, and Postgres may then plan it once for any parameters; that generic plan
# of the optional form cannot use jobs_by_tenant and reads and sorts every job (EXPLAIN:
# 8 ms at 10,000 jobs, growing with the table), where these read the page from the index.
#
# Each page is bounded in bytes inside the statement (byte_pages, issue 33): the candidates
# carry their size, and only the rows that fit come back whole. A job's size counts its
# spec (payload, exclusions: octet_length reads the TOAST header, not the value), the
# calendar it follows, its dependents and names. The calendar's JSON is bounded, not
# rendered (rendering 1,001 calendars of 1,000 days cost 124 ms a page; counting them 19 ms):
# 26 bytes a day or range ('"YYYY-MM-DD..YYYY-MM-DD", ') and CALENDAR_JSON_BYTES for the
# rest (a name of at most 128 characters, the version, found).
CALENDAR_JSON_BYTES = 200
EXCLUSION_JSON_BYTES = 26
# {t}: the jobs table's alias, if any.
JOB_BYTES = ("octet_length({t}spec)"
             f" + CASE WHEN {{t}}calendar IS NULL THEN 0 ELSE {CALENDAR_JSON_BYTES}"
             f" + {EXCLUSION_JSON_BYTES}"
             " * coalesce(jsonb_array_length({t}calendar->'exclusions'), 0) END"
             " + coalesce(pg_column_size({t}dependents), 0) + octet_length({t}name)"
             " + octet_length({t}tenant) + 96")
JOB_CANDIDATES = """
SELECT job_id, partition, tenant, name, status, version, spec, next_fire_at,
       last_fired_at, created_at, updated_at, dependents, calendar,
       {revision} AS revision, {bytes} AS bytes
FROM jobs
WHERE status <> 'deleted' {conditions}
ORDER BY created_at, job_id
LIMIT %(limit)s
""".replace("{bytes}", JOB_BYTES.replace("{t}", "")).replace("{revision}", REVISION)
# What a page returns (owner_sql.job_row's columns, then kept): the large columns of the
# marker row that only says "there is more" are NULL.
PAGE_COLUMNS = """job_id, partition, tenant, name, status, version,
       CASE WHEN kept THEN spec END, next_fire_at, last_fired_at, created_at, updated_at,
       CASE WHEN kept THEN dependents END, CASE WHEN kept THEN calendar END, revision"""
LIST_JOBS = byte_bounded(JOB_CANDIDATES, "created_at, job_id", PAGE_COLUMNS)
OF_TENANT = "AND tenant = %(tenant)s"
AFTER_TOKEN = "AND (created_at, job_id) > (%(after_created)s, %(after_job)s::uuid)"


# A filtered page reads job_listing (schema.sql) in the same keyset order, so a page token
# is the same position with or without filters. The tenant and status are checked on the
# jobs row too: what a filter reads can only narrow the tenant's view, never widen it.
FILTERED_CANDIDATES = """
SELECT j.job_id, j.partition, j.tenant, j.name, j.status, j.version, j.spec, j.next_fire_at,
       j.last_fired_at, j.created_at, j.updated_at, j.dependents, j.calendar,
       COALESCE(j.revision, j.version) AS revision, l.created_at AS listed_at,
       l.job_id AS listed_job, {bytes} AS bytes
FROM job_listing AS l JOIN jobs AS j ON j.job_id = l.job_id
WHERE l.status <> 'deleted' AND j.status <> 'deleted' {conditions}
ORDER BY l.created_at, l.job_id
LIMIT %(limit)s
""".replace("{bytes}", JOB_BYTES.replace("{t}", "j."))
LIST_FILTERED = byte_bounded(FILTERED_CANDIDATES, "listed_at, listed_job", PAGE_COLUMNS)
FILTER_TENANT = "AND l.tenant = %(tenant)s AND j.tenant = %(tenant)s"
FILTER_AFTER_TOKEN = "AND (l.created_at, l.job_id) > (%(after_created)s, %(after_job)s::uuid)"
FILTER_STATUSES = "AND l.status = ANY(%(statuses)s)"
FILTER_QUEUE = "AND l.queue = %(queue)s"
# Backslash escapes the pattern's own % and _ (like_pattern).
FILTER_NAME = "AND l.name ILIKE %(name_like)s ESCAPE '\\'"
FILTER_LABEL_VALUE = "AND l.labels @> %(label_{n})s::jsonb"
FILTER_LABEL_KEY = "AND l.labels ? %(label_{n})s"


@dataclass(frozen=True)
class JobListFilter:
    """ListJobs' filters, already checked by the api; empty ones select everything."""

    statuses: tuple[str, ...] = ()
    queue: str = ""
    # (key, value); a None value: the key with any value.
    labels: tuple[tuple[str, str | None], ...] = ()
    name_contains: str = ""

    @property
    def active(self) -> bool:
        return bool(self.statuses or self.queue or self.labels or self.name_contains)


def like_pattern(text: str) -> str:
    """An ILIKE pattern for `text` anywhere, its own wildcards taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def filter_sql(tenant: str | None, after: bool,
               job_filter: JobListFilter) -> tuple[str, dict[str, Any]]:
    """LIST_FILTERED with the conditions the filter uses, and their parameters."""
    conditions: list[str] = []
    params: dict[str, Any] = {}
    if tenant is not None:
        conditions.append(FILTER_TENANT)
    if after:
        conditions.append(FILTER_AFTER_TOKEN)
    if job_filter.statuses:
        conditions.append(FILTER_STATUSES)
        params["statuses"] = list(job_filter.statuses)
    if job_filter.queue:
        conditions.append(FILTER_QUEUE)
        params["queue"] = job_filter.queue
    if job_filter.name_contains:
        conditions.append(FILTER_NAME)
        params["name_like"] = like_pattern(job_filter.name_contains)
    for n, (key, value) in enumerate(job_filter.labels):
        if value is None:
            conditions.append(FILTER_LABEL_KEY.replace("{n}", str(n)))
            params[f"label_{n}"] = key
        else:
            conditions.append(FILTER_LABEL_VALUE.replace("{n}", str(n)))
            params[f"label_{n}"] = json.dumps({key: value})
    return LIST_FILTERED.replace("{conditions}", " ".join(conditions)), params


class InvalidPageToken(ValueError):
    """A page token that this service did not hand out."""


def _encode_token(row: JobRow) -> str:
    raw = f"{row.created_at.isoformat()}|{row.job_id}"
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_token(token: str) -> tuple[datetime, UUID]:
    try:
        created, job_id = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        return datetime.fromisoformat(created), UUID(job_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidPageToken(f"page_token {token!r} is not valid") from exc


# Jobs of one tenant by id, for the walk up a dependent's upstreams: the primary key finds
# them, the tenant keeps another tenant's job out of sight as if it did not exist.
TENANT_JOBS_BY_ID = """
SELECT job_id, spec FROM jobs
WHERE job_id = ANY(%(job_ids)s) AND tenant = %(tenant)s AND status <> 'deleted'
"""

COUNT_JOBS = "SELECT count(*) FROM jobs WHERE tenant = %(tenant)s AND status <> 'deleted'"
# Which of a batch's job ids exist (deleted ones too, as GetJob's row would): CreateJobs'
# retries, in one statement for the whole batch.
EXISTING_JOBS = "SELECT job_id FROM jobs WHERE job_id = ANY(%(job_ids)s)"

# RedriveDeadLetters' read (commands/api/dead_letters.py): the tenant's dead letters fired in
# [since, until), oldest first, at most %(limit)s (MOST_RUNS + 1). Runs carry no tenant: the
# job's row says whose they are and that the job is not deleted (a deleted job's dead
# letters cannot be re-driven, and would be chosen again by every call).
# Cost: of one job, the runs_dead_lettered_by_job index reads just the rows returned. Of a
# tenant, Postgres walks runs_dead_lettered in the window in order, each entry joined to its
# job by primary key, until it has `limit` of the tenant's: every tenant's dead letters of
# the window at worst (one index entry and one key lookup each, a few µs), within the
# reads' statement timeout (byte_pages.READ_STATEMENT_TIMEOUT_MS). Dead letters are rare next
# to runs; a tenant column on runs would make it exact.
DEAD_LETTERS = """
SELECT r.run_id, r.job_id, r.scheduled_at
FROM runs AS r JOIN jobs AS j ON j.job_id = r.job_id
WHERE r.status = 'dead_lettered' AND r.scheduled_at >= %(since)s AND r.scheduled_at < %(until)s
  AND j.tenant = %(tenant)s AND j.status <> 'deleted' {of_job}
ORDER BY r.scheduled_at, r.run_id
LIMIT %(limit)s
"""
OF_JOB = "AND r.job_id = %(job_id)s"


class CorruptJobSpec(StateStoreError):
    """A job row whose stored spec is not a job creation or update."""


class PostgresJobQueries:
    def __init__(self, dsn: str, codec: AvroCodec | None = None) -> None:
        # Every statement bounded in time (byte_pages.configure_reads): a read holds one of
        # the 8 connections for at most one bounded statement.
        self._pool = ConnectionPool(dsn, min_size=1, max_size=8, open=True,
                                    configure=configure_reads)
        self._codec = codec or AvroCodec()

    def close(self) -> None:
        self._pool.close()

    def _one(self, query: str, params: dict[str, Any], what: str) -> tuple[Any, ...] | None:
        try:
            with self._pool.connection() as conn:
                return conn.execute(query, params).fetchone()
        except psycopg.Error as exc:
            raise StateStoreError(f"{what}: {exc}") from exc

    def get(self, job_id: UUID) -> JobRow | None:
        row = self._one(GET_JOB, {"job_id": job_id}, f"reading job {job_id}")
        return job_row(row) if row else None

    def existing(self, job_ids: Collection[UUID]) -> set[UUID]:
        """Those of `job_ids` that have a row, whatever their status."""
        try:
            with self._pool.connection() as conn:
                rows = conn.execute(EXISTING_JOBS, {"job_ids": list(job_ids)}).fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"reading which of {len(job_ids)} jobs exist: {exc}") from exc
        return {row[0] for row in rows}

    def count_jobs(self, tenant: str) -> int:
        row = self._one(COUNT_JOBS, {"tenant": tenant}, f"counting jobs of {tenant}")
        return int(row[0]) if row else 0

    def upstreams(self, tenant: str,
                  job_ids: Collection[UUID]) -> dict[UUID, tuple[UUID, ...]]:
        """Those of `job_ids` that are the tenant's live jobs, each with the jobs it runs
        after (commands.upstream_check.UpstreamReader)."""
        try:
            with self._pool.connection() as conn:
                rows = conn.execute(TENANT_JOBS_BY_ID, {"job_ids": list(job_ids),
                                                        "tenant": tenant}).fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"reading the upstreams of tenant {tenant}: {exc}") from exc
        return {row[0]: self._after(row[0], bytes(row[1])) for row in rows}

    def _after(self, job_id: UUID, spec_event: bytes) -> tuple[UUID, ...]:
        try:
            name, record = self._codec.decode(spec_event)
        except CodecError as exc:
            raise CorruptJobSpec(f"job {job_id}: its stored spec does not decode: {exc}") from exc
        if name not in SPEC_EVENTS:
            raise CorruptJobSpec(f"job {job_id}: spec event is a {name}")
        after = spec_from_record(record["spec"]).after
        return () if after is None else tuple(after.job_ids)

    def run(self, run_id: UUID) -> RunRow | None:
        row = self._one(SELECT_RUN, {"run_id": run_id}, f"reading run {run_id}")
        return run_row(row) if row else None

    def dead_letters(self, tenant: str, job_id: UUID | None, since: datetime,
                     until: datetime, limit: int) -> list[DeadLetter]:
        """The tenant's dead letters for RedriveDeadLetters (ports.DeadLetterReader)."""
        query = DEAD_LETTERS.replace("{of_job}", OF_JOB if job_id is not None else "")
        params = {"tenant": tenant, "job_id": job_id, "since": since, "until": until,
                  "limit": limit}
        try:
            with self._pool.connection() as conn:
                rows = conn.execute(query, params).fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"reading the dead letters of {tenant}: {exc}") from exc
        return [DeadLetter(row[0], row[1], row[2]) for row in rows]

    @staticmethod
    def token_after(row: JobRow) -> str:
        """The page token of the page that starts after this job."""
        return _encode_token(row)

    def list(self, tenant: str | None, page_size: int, page_token: str | None,
             job_filter: JobListFilter | None = None,
             max_bytes: int = PAGE_BYTES) -> tuple[list[JobRow], str | None]:
        """At most page_size jobs in keyset order and, past the first, at most max_bytes of
        them (byte_pages): Postgres returns the page and at most one marker row more, never
        whole rows beyond it. The token is the position after the last job returned."""
        query, params, prepare = list_statement(tenant, page_size, page_token, job_filter,
                                                max_bytes)
        try:
            # Binary results: a spec's bytes arrive as they are, not as twice as much hex.
            with self._pool.connection() as conn, conn.cursor(binary=True) as cursor:
                found = cursor.execute(query, params, prepare=prepare).fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"listing jobs: {exc}") from exc
        rows = [job_row(r[:-1]) for r in found if r[-1]]
        more = len(rows) < len(found)
        return rows, (_encode_token(rows[-1]) if more and rows else None)


def list_statement(tenant: str | None, page_size: int, page_token: str | None,
                   job_filter: JobListFilter | None = None, max_bytes: int = PAGE_BYTES
                   ) -> tuple[str, dict[str, Any], bool | None]:
    """ListJobs' statement for one page, its parameters, and whether psycopg may prepare it."""
    after_created, after_job = _decode_token(page_token) if page_token else (None, None)
    params: dict[str, Any] = {"tenant": tenant, "after_created": after_created,
                              "after_job": str(after_job) if after_job else None,
                              "limit": page_size + 1, "page_size": page_size,
                              "max_bytes": max_bytes}
    # A filtered statement is planned for its values every time (prepare=False): which
    # index serves it depends on how rare the values are, which a plan made once for
    # any parameters cannot know; planning costs well under a millisecond.
    if job_filter is not None and job_filter.active:
        query, filter_params = filter_sql(tenant, after_created is not None, job_filter)
        params.update(filter_params)
        return query, params, False
    conditions = " ".join(c for c, used in ((OF_TENANT, tenant is not None),
                                            (AFTER_TOKEN, after_created is not None))
                          if used)
    return LIST_JOBS.replace("{conditions}", conditions), params, None
