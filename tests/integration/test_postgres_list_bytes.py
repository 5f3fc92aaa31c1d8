"""List reads bounded in bytes inside SQL (issue 33) against the real PostgreSQL: 1,000
jobs of 256 KiB specs following a calendar of 1,000 days, and calendars of 1,000 days each.
What the driver receives for one page is the page (at most 3 MiB of rows and one marker
row without its large columns), never the whole rows behind it; keyset pages, filtered or
not, visit every job once in order; a row over the budget comes alone; every statement of
the api's read pools is bounded in time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cronlog.infra.config import Settings
from cronlog.infra.page_bytes import PAGE_BYTES, cut
from cronlog.infra.postgres.byte_pages import READ_STATEMENT_TIMEOUT_MS
from cronlog.infra.postgres.calendar_reads import LIST_CALENDARS, PostgresCalendarReads
from cronlog.infra.postgres.job_queries import (
    JOB_BYTES,
    JobListFilter,
    PostgresJobQueries,
    list_statement,
)
from tests.conftest import make_isolated

pytestmark = pytest.mark.integration
JOBS = 1000
PAYLOAD = 256 * 1024
CALENDARS = 300

# Each fat job: a 256 KiB spec (distinct per job) and the applied calendar of 1,000 days;
# a few thin jobs of another tenant between them.
INSERT_JOBS = """
WITH holidays AS (
    SELECT jsonb_build_object('name', 'holidays', 'version', 1, 'found', true, 'exclusions',
           jsonb_agg(to_char(date '2030-01-01' + i, 'YYYY-MM-DD'))) AS calendar
    FROM generate_series(0, 999) AS i)
INSERT INTO jobs (job_id, partition, tenant, name, status, version, spec, created_at,
                  updated_at, calendar)
SELECT gen_random_uuid(), n %% 4, 'fat', 'job-' || n, 'active', 1,
       decode(repeat(lpad(to_hex(n), 8, '0'), %(payload)s / 4), 'hex'),
       timestamptz '2026-01-01' + make_interval(secs => n), now(), holidays.calendar
FROM generate_series(1, %(jobs)s) AS n, holidays
UNION ALL
SELECT gen_random_uuid(), 0, 'thin', 'thin-' || n, 'active', 1, '\\x00',
       timestamptz '2026-01-01' + make_interval(secs => n * 100), now(), NULL
FROM generate_series(1, 10) AS n
"""
LIST_ALL = """
INSERT INTO job_listing (job_id, tenant, created_at, status, name, queue, labels)
SELECT job_id, tenant, created_at, status, name, 'batch', '{"team": "data"}'::jsonb FROM jobs
"""
INSERT_CALENDARS = """
INSERT INTO calendars (tenant, name, calendar_id, partition, version, description,
                       exclusions, subscribers, created_at, updated_at)
SELECT 'fat', 'cal-' || lpad(n::text, 4, '0'), gen_random_uuid(), 0, 1, 'calendar ' || n,
       (SELECT jsonb_agg(to_char(date '2030-01-01' + i + n, 'YYYY-MM-DD'))
        FROM generate_series(0, 999) AS i), 0, now(), now()
FROM generate_series(1, %(calendars)s) AS n
"""


@pytest.fixture(scope="module")
def fat(stack_settings: Settings) -> Iterator[str]:
    """One database of fat rows for the module (about 300 MB of specs, written once)."""
    isolated = make_isolated(stack_settings)
    assert isinstance(isolated, Settings)
    with psycopg.connect(isolated.postgres_dsn, autocommit=True) as conn:
        conn.execute(INSERT_JOBS, {"jobs": JOBS, "payload": PAYLOAD})
        conn.execute(LIST_ALL)
        conn.execute(INSERT_CALENDARS, {"calendars": CALENDARS})
        conn.execute("ANALYZE")
    yield isolated.postgres_dsn


def received(dsn: str, query: str, params: dict[str, Any]) -> tuple[int, list[tuple[Any, ...]]]:
    """The bytes of the values the driver received for one statement, and its rows."""
    with psycopg.connect(dsn) as conn, conn.cursor(binary=True) as cursor:
        rows = cursor.execute(query, params).fetchall()
        result = cursor.pgresult
        assert result is not None
        size = sum(len(result.get_value(r, c) or b"")
                   for r in range(result.ntuples) for c in range(result.nfields))
    return size, rows


def sizes(dsn: str, tenant: str) -> list[int]:
    """Each job's size as the statements count it, in page order."""
    with psycopg.connect(dsn) as conn:
        return [int(r[0]) for r in conn.execute(
            f"SELECT {JOB_BYTES.replace('{t}', '')} FROM jobs WHERE tenant = %s"
            " ORDER BY created_at, job_id", (tenant,))]


@pytest.mark.parametrize("job_filter", [None, JobListFilter(queue="batch")],
                         ids=["unfiltered", "filtered"])
def test_one_page_of_fat_rows_is_at_most_its_bytes(fat: str,
                                                   job_filter: JobListFilter | None) -> None:
    query, params, _ = list_statement("fat", 1000, None, job_filter)
    size, rows = received(fat, query, params)
    kept = [r for r in rows if r[-1]]
    expected = cut(sizes(fat, "fat"), 1000, PAGE_BYTES)
    assert 1 < len(kept) == expected < 20, len(kept)
    # The page and one marker row without its large columns: not 1,000 rows of 270 KB.
    assert len(rows) == len(kept) + 1
    assert rows[-1][6] is None and rows[-1][12] is None
    assert size <= PAGE_BYTES + 4096, size
    # Nearly full (the calendars are counted at their bound): the next job did not fit.
    assert size > PAGE_BYTES - PAYLOAD - 200_000, size


@pytest.mark.parametrize("job_filter", [None, JobListFilter(queue="batch")],
                         ids=["unfiltered", "filtered"])
def test_keyset_pages_visit_every_fat_job_once_in_order(fat: str,
                                                        job_filter: JobListFilter | None
                                                        ) -> None:
    queries = PostgresJobQueries(fat)
    try:
        seen, token, pages = [], None, 0
        while True:
            page, token = queries.list("fat", 1000, token, job_filter)
            pages += 1
            assert page and sum(len(row.spec_event) for row in page) <= PAGE_BYTES
            assert all(row.calendar is not None and len(row.calendar.exclusions.ranges) == 1
                       for row in page)  # 1,000 consecutive days: one range
            seen += page
            if token is None:
                break
        assert len(seen) == JOBS and len({row.job_id for row in seen}) == JOBS
        assert {row.tenant for row in seen} == {"fat"}
        order = [(row.created_at, row.job_id) for row in seen]
        assert order == sorted(order)
        assert pages >= JOBS * PAYLOAD // PAGE_BYTES
    finally:
        queries.close()


def test_a_row_over_the_budget_comes_alone(fat: str) -> None:
    queries = PostgresJobQueries(fat)
    try:
        first, token = queries.list("fat", 50, None, max_bytes=1000)
        assert len(first) == 1 and token is not None
        second, _ = queries.list("fat", 50, token, max_bytes=1000)
        assert len(second) == 1 and second[0].job_id != first[0].job_id
        assert second[0].created_at > first[0].created_at
        # Small rows fill the page size, and a tenant sees only its own.
        thin, token = queries.list("thin", 4, None)
        assert len(thin) == 4 and token is not None
        rest, token = queries.list("thin", 100, token)
        assert len(rest) == 6 and token is None
    finally:
        queries.close()


def test_calendar_pages_are_bounded_in_bytes_and_whole(fat: str) -> None:
    size, rows = received(fat, LIST_CALENDARS, {"tenant": "fat", "limit": 1001,
                                                 "page_size": 1000, "max_bytes": PAGE_BYTES})
    assert size <= PAGE_BYTES + 4096 and len(rows) < CALENDARS
    assert rows[-1][-1] is False and rows[-1][5] is None
    reads = PostgresCalendarReads(fat)
    try:
        seen, token, pages = [], None, 0
        while True:
            page, token = reads.calendars("fat", 1000, token, max_bytes=1 << 20)
            pages += 1
            assert page
            seen += [view.name for view in page]
            if token is None:
                break
        assert seen == sorted(seen) and len(set(seen)) == len(seen) == CALENDARS
        assert pages > 1
    finally:
        reads.close()


def test_the_api_reads_are_bounded_in_time(fat: str) -> None:
    queries, reads = PostgresJobQueries(fat), PostgresCalendarReads(fat)
    try:
        for pool in (queries._pool, reads._pool.pool):
            with pool.connection() as conn:
                row = conn.execute("SHOW statement_timeout").fetchone()
                assert row is not None and row[0] == f"{READ_STATEMENT_TIMEOUT_MS // 1000}s"
                with pytest.raises(psycopg.errors.QueryCanceled):
                    conn.execute("SET LOCAL statement_timeout = 50")
                    conn.execute("SELECT pg_sleep(1)")
    finally:
        queries.close()
        reads.close()
