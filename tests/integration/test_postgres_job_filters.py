"""ListJobs' filters (PostgresJobQueries.list with a JobListFilter) against the real
PostgreSQL: jobs are written through the owner's apply, as the scheduler writes them, and
job_listing follows their creation, update, pause and delete; a filter keeps to the tenant,
pages whole with its token, takes a name's % and _ literally; a database from before
job_listing gets its jobs listed by ensure_schema."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import psycopg
import pytest

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.config import Settings
from cronlog.infra.postgres.connection import ensure_schema
from cronlog.infra.postgres.job_queries import JobListFilter, PostgresJobQueries
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.logged_events import CODEC, Logged

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)


class Owner:
    """Applies jobs' events to Postgres as partition 0's owner does."""

    def __init__(self, dsn: str) -> None:
        self.state = PostgresOwnerState(dsn)
        self.epoch = self.state.take_epoch(0, "test").epoch
        self.offset = 0
        self.at = T0

    def apply(self, *jobs: Job) -> None:
        logged = []
        for job in jobs:
            for event in job.collect_events():
                name, record = event_to_record(event)
                logged.append(Logged(self.offset, name, record, CODEC.encode(name, record)))
                self.offset += 1
        self.state.apply(0, self.epoch, logged, [])

    def create(self, name: str, tenant: str = "alpha", queue: str = "default",
               labels: dict[str, str] | None = None) -> Job:
        self.at += timedelta(seconds=1)  # created_at orders the pages
        spec = JobSpec(name=name, tenant=tenant, queue=queue, handler="echo",
                       cron="0 * * * *", labels=labels or {})
        job = Job.create(uuid4(), spec, "req-" + uuid4().hex, self.at)
        self.apply(job)
        return job


def names(queries: PostgresJobQueries, tenant: str | None, job_filter: JobListFilter,
          page_size: int = 100) -> list[str]:
    rows, token = queries.list(tenant, page_size, None, job_filter)
    assert token is None
    return [r.name for r in rows]


@pytest.fixture
def owner(isolated: Settings) -> Owner:
    return Owner(isolated.postgres_dsn)


def test_each_filter_selects_by_what_the_job_is_now(isolated: Settings, owner: Owner) -> None:
    report = owner.create("Nightly report", queue="batch", labels={"team": "data", "tier": "1"})
    owner.create("hourly sync", labels={"team": "ops"})
    cleanup = owner.create("cleanup", queue="batch")
    owner.create("beta report", tenant="beta", queue="batch", labels={"team": "data"})
    cleanup.pause("pause-1", owner.at)
    owner.apply(cleanup)
    queries = PostgresJobQueries(isolated.postgres_dsn)
    try:
        assert names(queries, "alpha", JobListFilter(queue="batch")) == ["Nightly report",
                                                                         "cleanup"]
        assert names(queries, "alpha", JobListFilter(statuses=("paused",))) == ["cleanup"]
        assert names(queries, "alpha", JobListFilter(statuses=("active", "completed"))) == [
            "Nightly report", "hourly sync"]
        assert names(queries, "alpha", JobListFilter(labels=(("team", "data"),))) == [
            "Nightly report"]
        assert names(queries, "alpha", JobListFilter(labels=(("team", None),))) == [
            "Nightly report", "hourly sync"]
        assert names(queries, "alpha", JobListFilter(
            labels=(("team", "data"), ("tier", "2")))) == []
        assert names(queries, "alpha", JobListFilter(name_contains="REPORT")) == [
            "Nightly report"]
        assert names(queries, "alpha", JobListFilter(queue="batch", name_contains="clean",
                                                     statuses=("paused",))) == ["cleanup"]
        # An update moves the job between filters; a deleted job is in none.
        report.update(JobSpec(name="Nightly digest", tenant="alpha", queue="mail",
                              handler="echo", cron="0 * * * *", labels={"team": "ops"}),
                      "update-1", owner.at)
        owner.apply(report)
        assert names(queries, "alpha", JobListFilter(queue="batch")) == ["cleanup"]
        assert names(queries, "alpha", JobListFilter(labels=(("team", "ops"),))) == [
            "Nightly digest", "hourly sync"]
        assert names(queries, "alpha", JobListFilter(name_contains="report")) == []
        cleanup.delete("delete-1", owner.at)
        owner.apply(cleanup)
        assert names(queries, "alpha", JobListFilter(queue="batch")) == []
        assert names(queries, "alpha", JobListFilter(name_contains="cleanup")) == []
    finally:
        queries.close()


def test_a_filter_never_widens_a_tenants_view(isolated: Settings, owner: Owner) -> None:
    owner.create("alpha one", labels={"team": "data"})
    owner.create("beta one", tenant="beta", labels={"team": "data"})
    owner.create("beta two", tenant="beta", queue="batch")
    queries = PostgresJobQueries(isolated.postgres_dsn)
    try:
        for job_filter in (JobListFilter(labels=(("team", "data"),)),
                           JobListFilter(name_contains="one"), JobListFilter(queue="batch"),
                           JobListFilter(statuses=("active",)),
                           JobListFilter(name_contains="' OR true --")):
            rows, _ = queries.list("alpha", 100, None, job_filter)
            assert {r.tenant for r in rows} <= {"alpha"}, job_filter
        assert names(queries, "beta", JobListFilter(name_contains="one")) == ["beta one"]
        # Open mode without a tenant: every tenant's matches.
        assert names(queries, None, JobListFilter(labels=(("team", "data"),))) == [
            "alpha one", "beta one"]
    finally:
        queries.close()


def test_a_filtered_list_pages_whole_and_in_order(isolated: Settings, owner: Owner) -> None:
    expected = []
    for n in range(23):
        job = owner.create(f"job-{n:02d}", queue="batch" if n % 3 == 0 else "default")
        if n % 3 == 0:
            expected.append(job.id)
    owner.create("beta batch", tenant="beta", queue="batch")
    queries = PostgresJobQueries(isolated.postgres_dsn)
    try:
        seen: list[UUID] = []
        token = None
        pages = 0
        while True:
            rows, token = queries.list("alpha", 3, token, JobListFilter(queue="batch"))
            seen += [r.job_id for r in rows]
            pages += 1
            if token is None:
                break
            # A job created between pages comes after the token: the pages stay stable.
            if pages == 1:
                expected.append(owner.create("late batch", queue="batch").id)
        assert seen == expected and pages == 3
    finally:
        queries.close()


def test_a_names_wildcards_are_plain_characters(isolated: Settings, owner: Owner) -> None:
    # A job name may hold _ (never % or a backslash, domain.spec.NAME_PATTERN); a filter may
    # hold all three, and each matches only itself.
    for name in ("a_b", "axb", "100 done"):
        owner.create(name)
    queries = PostgresJobQueries(isolated.postgres_dsn)
    try:
        assert names(queries, "alpha", JobListFilter(name_contains="a_b")) == ["a_b"]
        assert names(queries, "alpha", JobListFilter(name_contains="_")) == ["a_b"]
        assert names(queries, "alpha", JobListFilter(name_contains="%")) == []
        assert names(queries, "alpha", JobListFilter(name_contains="1%0")) == []
        assert names(queries, "alpha", JobListFilter(name_contains="a\\")) == []
        assert names(queries, "alpha", JobListFilter(name_contains="\\_")) == []
    finally:
        queries.close()


def test_a_label_holding_nul_is_listed_and_stops_nothing(isolated: Settings,
                                                         owner: Owner) -> None:
    owner.create("odd label", labels={"note": "a\x00b"})
    owner.create("after it", labels={"note": "plain"})
    queries = PostgresJobQueries(isolated.postgres_dsn)
    try:
        assert names(queries, "alpha", JobListFilter(labels=(("note", None),))) == [
            "odd label", "after it"]
    finally:
        queries.close()


def test_jobs_from_before_job_listing_are_listed_by_ensure_schema(isolated: Settings,
                                                                   owner: Owner) -> None:
    owner.create("old batch", queue="batch", labels={"team": "data"})
    owner.create("old default")
    with psycopg.connect(isolated.postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE job_listing")
    ensure_schema(isolated.postgres_dsn, isolated.partitions)
    queries = PostgresJobQueries(isolated.postgres_dsn)
    try:
        assert names(queries, "alpha", JobListFilter(queue="batch")) == ["old batch"]
        assert names(queries, "alpha", JobListFilter(labels=(("team", "data"),))) == [
            "old batch"]
        assert names(queries, "alpha", JobListFilter(name_contains="old")) == [
            "old batch", "old default"]
    finally:
        queries.close()
