"""ListJobs' read (PostgresJobQueries.list) against the real PostgreSQL: pages of one tenant
come whole and in order, and its statements read the page from jobs_by_tenant even when
Postgres plans them once for any parameters (a generic plan, as for a statement psycopg
prepared), instead of reading and sorting every job."""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
import pytest

from cronlog.infra.config import Settings
from cronlog.infra.postgres.job_queries import (
    AFTER_TOKEN,
    LIST_JOBS,
    OF_TENANT,
    PostgresJobQueries,
)

pytestmark = pytest.mark.integration
JOBS = 3000

INSERT_JOBS = """
INSERT INTO jobs (job_id, partition, tenant, name, status, version, spec, created_at,
                  updated_at)
SELECT gen_random_uuid(), n %% 4, CASE WHEN n %% 3 = 0 THEN 'beta' ELSE 'alpha' END,
       'job-' || n, CASE WHEN n %% 100 = 0 THEN 'deleted' ELSE 'active' END, 1, '\\x00',
       now() - make_interval(secs => n), now()
FROM generate_series(1, %(jobs)s) AS n
"""


@pytest.fixture
def jobs(isolated: Settings) -> Iterator[str]:
    with psycopg.connect(isolated.postgres_dsn, autocommit=True) as conn:
        conn.execute(INSERT_JOBS, {"jobs": JOBS})
        conn.execute("ANALYZE jobs")
    yield isolated.postgres_dsn


def _positional(query: str) -> tuple[str, list[str]]:
    names: list[str] = []

    def number(found: re.Match[str]) -> str:
        if found.group(1) not in names:
            names.append(found.group(1))
        return f"${names.index(found.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, query), names


def test_a_tenants_pages_are_whole_and_in_order(jobs: str) -> None:
    queries = PostgresJobQueries(jobs)
    try:
        seen, token = [], None
        while True:
            page, token = queries.list("alpha", 250, token)
            seen += page
            if token is None:
                break
        assert {row.tenant for row in seen} == {"alpha"}
        assert "deleted" not in {row.status for row in seen}
        with psycopg.connect(jobs) as conn:
            expected = conn.execute("SELECT count(*) FROM jobs WHERE tenant = 'alpha' "
                                    "AND status <> 'deleted'").fetchone()
        assert expected is not None and len(seen) == expected[0]
        assert len({row.job_id for row in seen}) == len(seen)
        order = [(row.created_at, row.job_id) for row in seen]
        assert order == sorted(order)
        everyone, _ = queries.list(None, JOBS, None)
        assert {row.tenant for row in everyone} == {"alpha", "beta"}
    finally:
        queries.close()


@pytest.mark.parametrize("conditions", [[OF_TENANT], [OF_TENANT, AFTER_TOKEN]])
def test_a_tenants_page_is_read_from_the_index_in_a_generic_plan(
        jobs: str, conditions: list[str]) -> None:
    sql, names = _positional(LIST_JOBS.replace("{conditions}", " ".join(conditions)))
    values = {"tenant": "'alpha'", "after_created": "now() - interval '1 hour'",
              "after_job": "'00000000-0000-0000-0000-000000000000'", "limit": "51",
              "page_size": "50", "max_bytes": "3145728"}
    with psycopg.connect(jobs, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE page AS {sql}")
        plan = "\n".join(row[0] for row in conn.execute(
            f"EXPLAIN EXECUTE page({', '.join(values[n] for n in names)})"))
    assert "Index Scan using jobs_by_tenant" in plan, plan
    assert "Seq Scan" not in plan and "Sort" not in plan, plan
