"""Interval jobs in the ClickHouse job history (issue 20), on the real server (18.16 from
Debian) and on a current engine (chdb): each schedule kind reaches `schedule_kind` and an
interval job's interval `every_ms`, through the Avro codec and the projector; a jobs table
from before those columns is brought up to date; docs/analytics.md's query on them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, _split_statements
from cronlog.infra.config import Settings
from cronlog.projections.job_history import JobHistoryProjector
from tests.support.chdb_engine import chdb_session
from tests.unit.avro.examples import SPEC_V4, SPEC_V5, SPEC_V5_CRON

pytestmark = pytest.mark.integration
DOC = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"
DOC_QUERY = "Jobs by schedule kind, and how often the interval jobs fire"
CODEC = AvroCodec()
AT = datetime(2026, 3, 1, 2, 0, 0, tzinfo=UTC)
Event = tuple[str, dict[str, Any]]
NINETY_MINUTES_MS = 5_400_000


def doc_query() -> str:
    found = re.search(rf"## {re.escape(DOC_QUERY)}\n.*?```sql\n(.*?)```", DOC.read_text(),
                      flags=re.S)
    assert found, DOC_QUERY
    return found.group(1)


# The versions that brought every_ms (JobCreated.v5, JobUpdated.v5); later ones add fields
# of their own, which these records leave out.
INTERVAL_VERSION = 5


def coded(name: str, record: dict[str, Any]) -> Event:
    """The record as the projector gets it from the log: a job spec encoded with the
    version of its schema that brought interval jobs, any other record with its newest
    version; decoded by the codec."""
    if name in ("JobCreated", "JobUpdated"):
        writer = next(v for v in CODEC.versions()
                      if (v.name, v.version) == (name, INTERVAL_VERSION))
        return CODEC.decode(CODEC.encode_with(writer, record))
    return CODEC.decode(CODEC.encode(name, record))


def job_event(name: str, job_id: UUID, version: int, tenant: str,
              schedule: dict[str, Any], **spec: Any) -> Event:
    full = {**SPEC_V5, "tenant": tenant, "name": f"job-{str(job_id)[:4]}",
            "schedule": {"cron": None, "at": None, "every_ms": None, **schedule}, **spec}
    return coded(name, {"job_id": job_id, "version": version,
                        "at": AT + timedelta(minutes=version), "request_id": f"r{version}",
                        "spec": full, "next_fire_at": AT + timedelta(days=1)})


@pytest.fixture
def history(stack_settings: Settings) -> Iterator[ClickHouseRunHistory]:
    """A database of its own on the stack's ClickHouse (nothing else of the stack needed)."""
    s = stack_settings
    store = ClickHouseRunHistory(s.clickhouse_host, s.clickhouse_port,
                                 "t" + uuid.uuid4().hex[:10], s.clickhouse_user,
                                 s.clickhouse_password)
    store.ensure_schema()
    yield store
    store.execute(f"DROP DATABASE IF EXISTS {store.database}")


def schedules(history: ClickHouseRunHistory, job_ids: list[UUID]
              ) -> dict[str, tuple[str, str, int, int]]:
    rows = history.execute(
        f"SELECT job_id, schedule_kind, cron, at_us, every_ms FROM {history.database}.jobs "
        "FINAL WHERE job_id IN %(ids)s", {"ids": tuple(str(j) for j in job_ids)})
    return {r[0]: tuple(r[1:]) for r in rows}


def test_each_schedule_kind_reaches_its_columns(history: ClickHouseRunHistory) -> None:
    tenant = "acme-" + uuid4().hex[:6]
    interval, cron, one_off, dependent, changed = (uuid4() for _ in range(5))
    events = [
        job_event("JobCreated", interval, 1, tenant,
                  {"kind": "every", "every_ms": NINETY_MINUTES_MS}),
        job_event("JobCreated", cron, 1, tenant, SPEC_V5_CRON["schedule"], start_at=None),
        job_event("JobCreated", one_off, 1, tenant, {"kind": "at", "at": AT}, start_at=None),
        job_event("JobCreated", dependent, 1, tenant, SPEC_V4["schedule"], start_at=None,
                  time_zone="UTC", after={"job_ids": [cron], "condition": "success",
                                          "wait_window_ms": 3_600_000}),
        # A cron job made an interval job, then a cron job again: the latest spec counts.
        job_event("JobCreated", changed, 1, tenant, {"kind": "cron", "cron": "0 * * * *"}),
        job_event("JobUpdated", changed, 2, tenant, {"kind": "every", "every_ms": 60_000}),
    ]
    projector = JobHistoryProjector(history)
    projector.apply_batch(events)
    projector.apply_batch(events)  # redelivered: the same rows
    ids = [interval, cron, one_off, dependent, changed]
    at_us = int(AT.timestamp()) * 1_000_000
    assert schedules(history, ids) == {
        str(interval): ("every", "", 0, NINETY_MINUTES_MS),
        str(cron): ("cron", "30 2 * * *", 0, 0),
        str(one_off): ("at", "", at_us, 0),
        str(dependent): ("after", "", 0, 0),
        str(changed): ("every", "", 0, 60_000),
    }
    # The projector reads the row back for a status event and keeps its schedule.
    paused = coded("JobPaused", {"job_id": interval, "version": 2, "at": AT + timedelta(hours=1),
                                 "request_id": "p"})
    projector.apply_batch([paused])
    row = history.latest_job_rows([str(interval)])[str(interval)]
    assert (row.status, row.schedule_kind, row.every_ms) == ("paused", "every",
                                                             NINETY_MINUTES_MS)
    projector.apply_batch([job_event("JobUpdated", changed, 3, tenant,
                                     {"kind": "cron", "cron": "*/5 * * * *"})])
    assert schedules(history, [changed])[str(changed)] == ("cron", "*/5 * * * *", 0, 0)

    by_kind = {(r[1], r[2], r[3], r[4], r[5]) for r in history.execute(
        doc_query().replace("cronlog.", f"{history.database}.")) if r[0] == tenant}
    # Paused: not active. 86,400,000 / 5,400,000 = 16 fire times a day had it been active.
    assert by_kind == {("every", 1, 0, 5400.0, 0.0), ("cron", 2, 2, None, 0.0),
                       ("at", 1, 1, None, 0.0), ("after", 1, 1, None, 0.0)}
    projector.apply_batch([coded("JobResumed", {
        "job_id": interval, "version": 3, "at": AT + timedelta(hours=2), "request_id": "q",
        "next_fire_at": AT + timedelta(hours=3)})])
    fires = {r[1]: r[5] for r in history.execute(
        doc_query().replace("cronlog.", f"{history.database}.")) if r[0] == tenant}
    assert fires["every"] == 16.0


# The jobs table as issue 16 left it (no schedule_kind, no every_ms), and as first released
# (without the dependency columns either): schema_columns.sql brings both up to date.
OLD_JOBS = """
CREATE TABLE {db}.jobs
(
    created_at DateTime, tenant String, job_id String, name String, queue String,
    handler String, cron String, at_us Int64, time_zone String, status String,
    label_keys Array(String), label_values Array(String), created_at_us Int64,
    updated_at_us Int64, version UInt64{dependency_columns}
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(created_at)
ORDER BY (tenant, job_id)
"""
DEPENDENCY_COLUMNS = (", after_job_ids Array(String), after_condition String, "
                      "wait_window_ms Int64, dependent_job_ids Array(String)")
OLD_ROWS = [  # job_id, cron, at_us, after_job_ids (in the issue 16 table only)
    ("cron-job", "0 2 * * *", 0, []), ("one-off", "", 1772330400000000, []),
    ("interval", "", 0, []), ("dependent", "", 0, ["cron-job"])]


def column_types(history: ClickHouseRunHistory, db: str) -> set[tuple[str, str, str]]:
    return {(n, t, re.sub(r"\s+", " ", d)) for n, t, d in history.execute(
        "SELECT name, type, default_expression FROM system.columns WHERE database = %(db)s "
        "AND table = 'jobs'", {"db": db})}


@pytest.mark.parametrize("dependency_columns", [DEPENDENCY_COLUMNS, ""],
                         ids=["from issue 16", "from the first release"])
def test_a_jobs_table_from_before_interval_schedules_is_brought_up_to_date(
        history: ClickHouseRunHistory, stack_settings: Settings, dependency_columns: str
        ) -> None:
    db = history.database
    history.execute(f"DROP TABLE {db}.jobs")
    history.execute(OLD_JOBS.replace("{db}", db)
                    .replace("{dependency_columns}", dependency_columns))
    assert not {"schedule_kind", "every_ms"} & {n for n, _, _ in column_types(history, db)}
    rows = OLD_ROWS if dependency_columns else [r for r in OLD_ROWS if not r[3]]
    after = ", after_job_ids" if dependency_columns else ""
    history.execute(
        f"INSERT INTO {db}.jobs (created_at, tenant, job_id, cron, at_us, version{after}) "
        "VALUES", [(datetime(2026, 3, 1, 2), "old", job, cron, at_us, 1,
                    *([ups] if dependency_columns else [])) for job, cron, at_us, ups in rows])
    history.ensure_schema()
    history.ensure_schema()  # again, as every process does at start: nothing to add

    # Old rows read the kind their columns tell; an interval job's waits for a rebuild.
    old = {r[0]: r[1:] for r in history.execute(
        f"SELECT job_id, schedule_kind, every_ms FROM {db}.jobs WHERE tenant = 'old'")}
    expected = {"cron-job": ("cron", 0), "one-off": ("at", 0), "interval": ("", 0),
                "dependent": ("after", 0)}
    assert old == {job: expected[job] for job, *_ in rows}

    # The columns, their types and defaults, are those of a database made now.
    st = stack_settings
    made = ClickHouseRunHistory(st.clickhouse_host, st.clickhouse_port, db + "_new",
                                st.clickhouse_user, st.clickhouse_password)
    made.ensure_schema()
    try:
        assert column_types(history, db) == column_types(history, made.database)
    finally:
        history.execute(f"DROP DATABASE IF EXISTS {made.database}")

    # New events reach them through the adapter, as a rebuild from the log writes them.
    job = uuid4()
    JobHistoryProjector(history).apply_batch([job_event(
        "JobCreated", job, 1, "acme", {"kind": "every", "every_ms": NINETY_MINUTES_MS})])
    assert schedules(history, [job]) == {str(job): ("every", "", 0, NINETY_MINUTES_MS)}


def test_ddl_columns_and_query_are_valid_on_a_current_engine() -> None:
    from importlib.resources import files

    s = chdb_session()
    package = files("cronlog.infra.clickhouse")
    for statement in _split_statements(package.joinpath("schema.sql").read_text()):
        s.query(statement.replace("{db}", "cronlog"))
    s.query("INSERT INTO cronlog.jobs (created_at, job_id, cron, at_us) "
            "VALUES ('2026-03-01 02:00:00', 'j', '0 2 * * *', 0)")
    assert s.query("SELECT schedule_kind, every_ms FROM cronlog.jobs", "CSV"
                   ).bytes().decode().strip() == '"cron",0'
    s.query(doc_query())
    s.query("CREATE DATABASE old")
    s.query(OLD_JOBS.replace("{db}", "old").replace("{dependency_columns}", ""))
    s.query("INSERT INTO old.jobs (created_at, job_id, cron, at_us) "
            "VALUES ('2026-03-01 02:00:00', 'j', '', 1772330400000000)")
    for statement in _split_statements(package.joinpath("schema_columns.sql").read_text()):
        if ".jobs " in statement:
            s.query(statement.replace("{db}", "old"))
    assert s.query("SELECT schedule_kind, every_ms FROM old.jobs", "CSV"
                   ).bytes().decode().strip() == '"at",0'
