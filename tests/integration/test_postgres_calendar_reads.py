"""The api's read of the `calendars` table (PostgresCalendarReads) against the real
PostgreSQL: a tenant reads its own calendars only, pages come whole and in name order, and
the stored exclusions come back as the domain's."""

from __future__ import annotations

import json
from collections.abc import Iterator

import psycopg
import pytest

from cronlog.domain.exclusions import calendar_id
from cronlog.infra.config import Settings
from cronlog.infra.postgres.calendar_reads import PostgresCalendarReads

pytestmark = pytest.mark.integration

INSERT = """
INSERT INTO calendars (tenant, name, calendar_id, partition, version, description, exclusions,
                       subscribers, created_at, updated_at)
VALUES (%(tenant)s, %(name)s, %(calendar_id)s, 0, %(version)s, %(description)s,
        %(exclusions)s::jsonb, %(subscribers)s, now(), now())
"""


@pytest.fixture
def reads(isolated: Settings) -> Iterator[PostgresCalendarReads]:
    with psycopg.connect(isolated.postgres_dsn, autocommit=True) as conn:
        for tenant, count in (("alpha", 25), ("beta", 3)):
            for n in range(count):
                name = f"cal-{n:02d}"
                conn.execute(INSERT, {
                    "tenant": tenant, "name": name, "calendar_id": calendar_id(tenant, name),
                    "version": n + 1, "description": f"{tenant} {n}",
                    "exclusions": json.dumps(["2026-12-25..2026-12-26", "2027-01-01"]),
                    "subscribers": n})
    queries = PostgresCalendarReads(isolated.postgres_dsn)
    try:
        yield queries
    finally:
        queries.close()


def test_a_tenant_reads_its_own_calendar_only(reads: PostgresCalendarReads) -> None:
    mine = reads.calendar("beta", "cal-02")
    assert mine is not None
    assert (mine.tenant, mine.version, mine.description, mine.subscribers) == (
        "beta", 3, "beta 2", 2)
    assert mine.calendar_id == calendar_id("beta", "cal-02")
    assert mine.exclusions.texts() == ["2026-12-25..2026-12-26", "2027-01-01"]
    assert reads.calendar("beta", "cal-10") is None  # alpha has one of that name
    assert reads.calendar("gamma", "cal-02") is None
    assert (reads.count_calendars("alpha"), reads.count_calendars("beta"),
            reads.count_calendars("gamma")) == (25, 3, 0)


def test_pages_are_whole_in_name_order_and_of_one_tenant(reads: PostgresCalendarReads) -> None:
    seen, token, pages = [], None, 0
    while True:
        page, token = reads.calendars("alpha", 10, token)
        seen += page
        pages += 1
        if token is None:
            break
    assert pages == 3
    assert [c.name for c in seen] == [f"cal-{n:02d}" for n in range(25)]
    assert {c.tenant for c in seen} == {"alpha"}
    page, token = reads.calendars("beta", 10, None)
    assert ([c.name for c in page], token) == (["cal-00", "cal-01", "cal-02"], None)
