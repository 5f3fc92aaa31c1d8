"""docs/analytics.md's queries on real projected history, and retention dropping old days,
on the ClickHouse server the tests start (and the queries on a current engine too)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import uuid4

import pytest

from cronlog.infra.clickhouse.retention import HistoryRetention
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, _split_statements
from cronlog.infra.config import Settings
from cronlog.projections.history import HistoryProjector
from tests.support.chdb_engine import chdb_session

pytestmark = pytest.mark.integration
DOC = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"


def doc_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(), flags=re.S)


def run_events(at: datetime, tenant: str, fail_first: bool, lag_ms: int) -> list[
        tuple[str, dict[str, object]]]:
    base = {"run_id": str(uuid4()), "job_id": f"00000000-0000-0000-0000-00000000000{len(tenant) % 9}"}
    events: list[tuple[str, dict[str, object]]] = [
        ("RunScheduled", {**base, "version": 1, "at": at, "tenant": tenant, "queue": "q",
                          "handler": "h", "scheduled_at": at, "not_before": at,
                          "trigger": "schedule", "max_attempts": 2}),
        ("AttemptDispatched", {**base, "version": 2, "at": at, "attempt": 1, "not_before": at,
                               "timeout_ms": 1000}),
        ("AttemptStarted", {**base, "version": 3, "at": at, "attempt": 1, "worker": "w",
                            "started_at": at + timedelta(milliseconds=lag_ms)})]
    if fail_first:
        events += [
            ("AttemptFailed", {**base, "version": 4, "at": at, "attempt": 1, "worker": "w",
                               "finished_at": at + timedelta(seconds=1), "error": "X: no",
                               "output": b"", "output_truncated": False}),
            ("AttemptDispatched", {**base, "version": 5, "at": at, "attempt": 2,
                                   "not_before": at + timedelta(seconds=2), "timeout_ms": 1000}),
            ("AttemptStarted", {**base, "version": 6, "at": at, "attempt": 2, "worker": "w",
                                # At least 10 ms late like every attempt here: the lag
                                # query's p50 interpolates between an hour's attempts.
                                "started_at": at + timedelta(seconds=2, milliseconds=15)}),
            ("AttemptFailed", {**base, "version": 7, "at": at, "attempt": 2, "worker": "w",
                               "finished_at": at + timedelta(seconds=3), "error": "X: no",
                               "output": b"", "output_truncated": False}),
            ("RunFailed", {**base, "version": 8, "at": at, "reason": "attempt 2 of 2 failed"})]
    else:
        events += [
            ("AttemptSucceeded", {**base, "version": 4, "at": at, "attempt": 1, "worker": "w",
                                  "finished_at": at + timedelta(seconds=2), "output": b"ok",
                                  "output_truncated": False}),
            ("RunSucceeded", {**base, "version": 5, "at": at})]
    return events


@pytest.fixture
def history(isolated: Settings) -> ClickHouseRunHistory:
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    return store


def test_every_documented_query_runs_on_real_history(history: ClickHouseRunHistory) -> None:
    projector = HistoryProjector(history)
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(40):
        at = now - timedelta(minutes=3 * i)
        projector.apply_batch(run_events(at, ["acme", "globex"][i % 2], i % 5 == 0, 10 + i))
    queries = doc_queries()
    assert len(queries) == 10
    for query in queries:
        if "missed_fire_times" in query:
            continue  # test_clickhouse_missed_fire_times runs it on projected ranges
        if "logical_time" in query:
            continue  # test_clickhouse_dependency_history runs them on a chain of runs
        if "schedule_kind" in query:
            continue  # test_clickhouse_interval_jobs runs it on projected jobs
        if "job_events" in query:
            continue  # test_clickhouse_job_events runs it on projected job events
        rows = history.execute(query.replace("cronlog.", f"{history.database}."))
        assert rows, f"no rows from:\n{query}"
    lag = history.execute(queries[0].replace("cronlog.", f"{history.database}."))
    assert all(p50 >= 10 for _, _, _, p50, _ in lag)
    failures = history.execute(queries[1].replace("cronlog.", f"{history.database}."))
    assert sum(row[4] for row in failures) == 8  # i % 5 == 0 for 40 runs


def test_documented_queries_run_on_a_current_engine() -> None:
    from importlib.resources import files

    s = chdb_session()
    ddl = files("cronlog.infra.clickhouse").joinpath("schema.sql").read_text()
    for statement in _split_statements(ddl):
        s.query(statement.replace("{db}", "cronlog"))
    for query in doc_queries():
        s.query(query)


def test_retention_drops_old_days_and_keeps_new_ones(history: ClickHouseRunHistory) -> None:
    projector = HistoryProjector(history)
    now = datetime.now(UTC).replace(microsecond=0)
    old, recent = now - timedelta(days=100), now - timedelta(days=1)
    projector.apply_batch(run_events(old, "acme", False, 5))
    projector.apply_batch(run_events(recent, "acme", False, 5))
    dropped = HistoryRetention(history, keep=timedelta(days=90)).run(now)
    assert ("runs", int(old.strftime("%Y%m%d"))) in dropped
    days = {d for (d,) in history.execute(
        f"SELECT DISTINCT toYYYYMMDD(scheduled_at) FROM {history.database}.runs")}
    assert days == {int(recent.strftime("%Y%m%d"))}
    event_days = {d for (d,) in history.execute(
        f"SELECT DISTINCT toYYYYMMDD(at) FROM {history.database}.run_events")}
    assert int(old.strftime("%Y%m%d")) not in event_days
