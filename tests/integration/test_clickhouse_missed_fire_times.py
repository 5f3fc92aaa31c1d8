"""Missed fire time ranges (JobFireTimesMissed) projected into ClickHouse 18.16: one row per
range, the same after redelivery, docs/analytics.md's per-day query on them, and retention."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from cronlog.domain.job import Job
from cronlog.domain.policies import MisfirePolicy
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.clickhouse.retention import HistoryRetention
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import Settings
from cronlog.projections.job_history import JobHistoryProjector

pytestmark = pytest.mark.integration
DOC = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"


def missed_per_day_query() -> str:
    queries: list[str] = [q for q in re.findall(r"```sql\n(.*?)```", DOC.read_text(),
                                                 flags=re.S) if "missed_fire_times" in q]
    assert len(queries) == 1
    return queries[0]


@pytest.fixture
def history(isolated: Settings) -> ClickHouseRunHistory:
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    return store


def paused_job_events(tenant: str, paused_at: datetime, resumed_at: datetime,
                      cron: str = "* * * * * *") -> tuple[Job, list[tuple[str, dict[str, Any]]]]:
    """A job's events, through the codec, when it comes back from a pause."""
    spec = JobSpec(name="n", tenant=tenant, queue="q", handler="h", cron=cron,
                   time_zone="Europe/Berlin", misfire_policy=MisfirePolicy.SKIP)
    job = Job.create(uuid4(), spec, "create", paused_at)
    job.pause("pause", paused_at)
    job.resume("resume", resumed_at)
    job.fire_due(resumed_at, resumed_at, timedelta(seconds=60))
    codec = AvroCodec()
    return job, [codec.decode(codec.encode(*event_to_record(e))) for e in job.collect_events()]


def test_a_range_is_one_row_and_redelivery_changes_nothing(
        history: ClickHouseRunHistory) -> None:
    tenant = "acme-" + uuid4().hex[:6]
    now = datetime.now(UTC).replace(microsecond=0)
    job, events = paused_job_events(tenant, now - timedelta(days=2), now)
    JobHistoryProjector(history).apply_batch(events)
    JobHistoryProjector(history).apply_batch(events[2:])  # a restarted projector, again
    rows = history.missed_fire_times(tenant, str(job.id))
    assert len(rows) == 1
    row = rows[0]
    # Two days of every second, less the last minute and the resume second itself (the
    # catch-up window runs them: fire times from now - 60 s on).
    assert row.count == 2 * 86_400 - 61
    assert row.last_us - row.first_us == (row.count - 1) * 1_000_000
    assert row.reason.startswith("misfired")
    # Another tenant's history does not see it.
    assert history.missed_fire_times("other", str(job.id)) == []


def test_the_documented_per_day_query_counts_missed_fire_times(
        history: ClickHouseRunHistory) -> None:
    tenant = "globex-" + uuid4().hex[:6]
    now = datetime.now(UTC).replace(microsecond=0)
    hourly, hourly_events = paused_job_events(tenant, now - timedelta(hours=30), now,
                                              cron="0 * * * *")
    every_second, second_events = paused_job_events(tenant, now - timedelta(hours=1), now)
    JobHistoryProjector(history).apply_batch([*hourly_events, *second_events])
    rows = history.execute(missed_per_day_query().replace("cronlog.", f"{history.database}."))
    mine = [r for r in rows if r[1] == tenant]
    per_job: dict[str, int] = {}
    for _, _, job_id, missed, _, _ in mine:
        per_job[job_id] = per_job.get(job_id, 0) + missed
    assert per_job[str(every_second.id)] == 3600 - 61
    assert per_job[str(hourly.id)] == sum(
        r["count"] for n, r in hourly_events if n == "JobFireTimesMissed")
    assert 29 <= per_job[str(hourly.id)] <= 30


def test_retention_drops_ranges_recorded_before_the_window(
        history: ClickHouseRunHistory) -> None:
    tenant = "initech-" + uuid4().hex[:6]
    now = datetime.now(UTC).replace(microsecond=0)
    old, old_events = paused_job_events(tenant, now - timedelta(days=101), now - timedelta(
        days=100), cron="*/5 * * * *")
    recent, recent_events = paused_job_events(tenant, now - timedelta(days=2), now)
    JobHistoryProjector(history).apply_batch([*old_events, *recent_events])
    dropped = HistoryRetention(history, keep=timedelta(days=90)).run(now)
    assert ("missed_fire_times", int((now - timedelta(days=100)).strftime("%Y%m%d"))) in dropped
    assert history.missed_fire_times(tenant, str(old.id)) == []
    assert len(history.missed_fire_times(tenant, str(recent.id))) == 1
