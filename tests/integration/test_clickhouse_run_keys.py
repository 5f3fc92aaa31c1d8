"""A run found by its id through run_keys, against the real ClickHouse server (18.16): the
lookup and the read of `runs` each read a granule or two, where a lookup by run_id alone
reads every row; a database from before run_keys gets its runs' keys,
and retention drops a day's keys with its runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from clickhouse_driver import Client

from cronlog.infra.clickhouse.history_sql import RUN_ATTEMPTS, RUN_LOCATIONS, SELECT_ATTEMPTS
from cronlog.infra.clickhouse.retention import HistoryRetention
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, RunFilter
from cronlog.infra.config import Settings
from cronlog.projections.history import HistoryProjector
from tests.support.run_events import scheduled

pytestmark = pytest.mark.integration
NOW = datetime.now(UTC).replace(microsecond=0)


def _store(settings: Settings) -> ClickHouseRunHistory:
    return ClickHouseRunHistory(settings.clickhouse_host, settings.clickhouse_port,
                                settings.clickhouse_database, settings.clickhouse_user,
                                settings.clickhouse_password)


@pytest.fixture
def history(isolated: Settings) -> Iterator[ClickHouseRunHistory]:
    store = _store(isolated)
    store.ensure_schema()
    yield store


@pytest.fixture
def reader(isolated: Settings) -> Client:
    return Client(host=isolated.clickhouse_host, port=isolated.clickhouse_port,
                  user=isolated.clickhouse_user, password=isolated.clickhouse_password)


def _rows_read(client: Client, query: str, params: dict[str, object]) -> tuple[list[Any], int]:
    found = client.execute(query, params)
    assert client.last_query is not None
    return found, int(client.last_query.progress.rows)


def _many_runs(history: ClickHouseRunHistory, count: int) -> None:
    """count runs of other jobs over the last 3 days, as the projector writes them."""
    db = history.database
    history.execute(f"""INSERT INTO {db}.runs (scheduled_at, scheduled_at_us, tenant, job_id,
        run_id, attempt, version)
        SELECT toDateTime(t), t * 1000000, 't0', toString(n %% 1000), toString(generateUUIDv4()),
               1, 1
        FROM (SELECT number AS n, toUInt32(%(now)s - n * 259200 / %(count)s) AS t
              FROM numbers(%(count)s))""", {"now": int(NOW.timestamp()), "count": count})
    history.execute(f"INSERT INTO {db}.run_keys (scheduled_at, run_id, tenant, job_id) "
                    f"SELECT scheduled_at, run_id, tenant, job_id FROM {db}.runs")


def _fill(history: ClickHouseRunHistory, days: int = 3, per_day: int = 4) -> list[str]:
    projector = HistoryProjector(history)
    run_ids = []
    for day in range(days):
        for i in range(per_day):
            run_id = str(uuid4())
            run_ids.append(run_id)
            projector.apply_batch(scheduled(run_id, str(uuid4()),
                                            NOW - timedelta(days=day, minutes=i),
                                            tenant=f"t{i % 2}"))
    return run_ids


def test_get_run_reads_both_tables_by_their_key(history: ClickHouseRunHistory,
                                                reader: Client) -> None:
    run_ids = _fill(history)
    wanted = run_ids[5]
    attempts = history.get_run(wanted)
    assert [(a.run_id, a.attempt, a.run_status) for a in attempts] == [
        (wanted, 1, "succeeded")]
    assert history.get_run(str(uuid4())) == []
    assert set(history.latest_attempt_rows(run_ids[:3])) == set(run_ids[:3])
    assert all(len(rows) == 1 for rows in history.latest_attempt_rows(run_ids).values())

    total = 300_000
    _many_runs(history, total)
    assert [a.run_id for a in history.get_run(wanted)] == [wanted]
    db = history.database
    located, read = _rows_read(reader, RUN_LOCATIONS.replace("{db}", db),
                               {"run_ids": (wanted,)})
    assert len(located) == 1 and read <= 8 * 1024, read  # a granule per day partition and part
    tenant, job_id, at, run_id = located[0]
    found, read = _rows_read(reader, RUN_ATTEMPTS.replace("{db}", db), {
        "tenants": (tenant,), "job_ids": (job_id,), "times": (at,), "run_ids": (run_id,)})
    assert len(found) == 1 and read <= 2 * 8192, read
    # What GetRun asked before run_keys: every row of the day partitions.
    _, read = _rows_read(reader, (SELECT_ATTEMPTS + " WHERE run_id IN %(run_ids)s")
                         .replace("{db}", db), {"run_ids": (wanted,)})
    assert read >= total, read


def test_list_runs_of_a_job_reads_runs_by_key(history: ClickHouseRunHistory) -> None:
    job_id = str(uuid4())
    projector = HistoryProjector(history)
    run_ids = [str(uuid4()) for _ in range(3)]
    for i, run_id in enumerate(run_ids):
        projector.apply_batch(scheduled(run_id, job_id, NOW - timedelta(days=i)))
    page, token = history.list_runs(RunFilter(job_id=job_id, tenant="t"), 2, None)
    assert [rows[0].run_id for rows in page] == run_ids[:2] and token is not None
    rest, token = history.list_runs(RunFilter(job_id=job_id, tenant="t"), 2, token)
    assert [rows[0].run_id for rows in rest] == run_ids[2:] and token is None
    assert all(rows[0].output == "ok" for rows in page + rest)


def test_a_database_from_before_run_keys_gets_its_runs_keys(isolated: Settings) -> None:
    old = _store(isolated)
    old.ensure_schema()
    run_ids = _fill(old, days=2, per_day=2)
    old.execute(f"DROP TABLE {old.database}.run_keys")
    upgraded = _store(isolated)
    upgraded.ensure_schema()
    assert all(upgraded.get_run(r) for r in run_ids)
    upgraded.ensure_schema()  # again: nothing filled twice that a lookup would show
    assert [len(upgraded.get_run(r)) for r in run_ids] == [1] * len(run_ids)


def test_retention_drops_a_days_keys_with_its_runs(history: ClickHouseRunHistory) -> None:
    projector = HistoryProjector(history)
    old_run, new_run = str(uuid4()), str(uuid4())
    projector.apply_batch(scheduled(old_run, str(uuid4()), NOW - timedelta(days=100)))
    projector.apply_batch(scheduled(new_run, str(uuid4()), NOW))
    dropped = HistoryRetention(history, keep=timedelta(days=90)).run(NOW)
    assert {table for table, _ in dropped} >= {"runs", "run_keys"}
    keys = history.execute(f"SELECT run_id FROM {history.database}.run_keys")
    assert keys == [(new_run,)]
    assert history.get_run(old_run) == [] and history.get_run(new_run)
