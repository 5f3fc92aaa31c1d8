"""ClickHouseRunHistory against the real ClickHouse server (18.16 from Debian), and the same
DDL and queries on a current engine (chdb)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from cronlog.infra.clickhouse.history_sql import (
    ATTEMPT_COLUMNS,
    FILL_RUN_KEYS,
    LIST_RUN_KEYS,
    RUN_ATTEMPTS,
    RUN_LOCATIONS,
    RUN_SIZES,
)
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, RunFilter, _split_statements
from cronlog.infra.config import Settings
from cronlog.projections.history import AttemptRow, HistoryProjector
from tests.support.chdb_engine import chdb_session
from tests.support.run_events import scheduled

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def history(isolated: Settings) -> Iterator[ClickHouseRunHistory]:
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    yield store


def test_redelivered_events_do_not_duplicate_runs(history: ClickHouseRunHistory) -> None:
    run_id, job_id = str(uuid4()), str(uuid4())
    events = scheduled(run_id, job_id, T0)
    HistoryProjector(history).apply_batch(events[:3])
    HistoryProjector(history).apply_batch(events)  # a restarted projector, some again
    attempts = history.get_run(run_id)
    assert len(attempts) == 1
    assert attempts[0].run_status == "succeeded"
    assert attempts[0].start_lag_us == 25_000
    assert attempts[0].output == "ok"


def test_list_runs_filters_and_pages_stably(history: ClickHouseRunHistory) -> None:
    job_id = str(uuid4())
    projector = HistoryProjector(history)
    run_ids = []
    for i in range(5):
        run_id = str(uuid4())
        run_ids.append(run_id)
        projector.apply_batch(scheduled(run_id, job_id, T0 + timedelta(minutes=i)))
    projector.apply_batch(scheduled(str(uuid4()), str(uuid4()), T0, tenant="other"))
    seen: list[str] = []
    token = None
    while True:
        page, token = history.list_runs(RunFilter(job_id=job_id), 2, token)
        seen.extend(rows[0].run_id for rows in page)
        if token is None:
            break
    assert seen == list(reversed(run_ids)), "newest first, every run once"
    only_other, _ = history.list_runs(RunFilter(tenant="other"), 10, None)
    assert len(only_other) == 1
    window, _ = history.list_runs(RunFilter(job_id=job_id, scheduled_after=T0 + timedelta(
        minutes=1), scheduled_before=T0 + timedelta(minutes=3)), 10, None)
    assert [rows[0].run_id for rows in window] == [run_ids[2], run_ids[1]]
    failed, _ = history.list_runs(RunFilter(job_id=job_id, status="failed"), 10, None)
    assert failed == []


def test_a_page_of_runs_is_bounded_in_bytes(history: ClickHouseRunHistory) -> None:
    """Issue 33: runs of 64 KiB outputs; a page reads the attempts of the runs that fit in
    its bytes only (the sizes come first), and the pages still visit every run once."""
    job_id, projector, run_ids = str(uuid4()), HistoryProjector(history), []
    for i in range(60):
        run_id = str(uuid4())
        run_ids.append(run_id)
        events = scheduled(run_id, job_id, T0 + timedelta(minutes=i))
        events[3][1]["output"] = bytes([65 + i % 26]) * 65536
        projector.apply_batch(events)
    read: list[str] = []
    execute = history._execute

    def counting(query: str, params: object = None) -> object:
        rows = execute(query, params)
        if query == history._sql(RUN_ATTEMPTS):
            read.extend(row[ATTEMPT_COLUMNS.index("run_id")] for row in rows)
        return rows

    history._execute = counting  # type: ignore[method-assign]
    seen: list[str] = []
    token: str | None = None
    while True:
        read.clear()
        page, token = history.list_runs(RunFilter(job_id=job_id), 1000, token,
                                         max_bytes=1 << 20)
        assert 1 <= len(page) <= 15 and len(set(read)) == len(page)
        assert sum(len(a.output) for rows in page for a in rows) <= 1 << 20
        seen.extend(rows[0].run_id for rows in page)
        if token is None:
            break
    assert seen == list(reversed(run_ids))
    alone, token = history.list_runs(RunFilter(job_id=job_id), 10, None, max_bytes=1000)
    assert len(alone) == 1 and token is not None


def test_ddl_and_queries_also_run_on_a_current_engine() -> None:
    from importlib.resources import files

    db = "chdb_check"
    ddl = files("cronlog.infra.clickhouse").joinpath("schema.sql").read_text()
    s = chdb_session()
    for statement in _split_statements(ddl):
        s.query(statement.replace("{db}", db))
    # clickhouse-driver fills %(x)s parameters client side; substitute literals here.
    literals = {"run_ids": "('a', 'b')", "limit": "10", "tenants": "('x')",
                "job_ids": "('j')", "times": "(1767225600)"}
    for query in (RUN_ATTEMPTS, RUN_SIZES, LIST_RUN_KEYS, RUN_LOCATIONS, FILL_RUN_KEYS):
        sql = query.replace("{db}", db).replace("{final}", "FINAL").replace(
            "{filters}", " AND tenant = 'x' AND (scheduled_at_us < 5 OR (scheduled_at_us "
                         "= 5 AND run_id < 'r'))")
        sql = re.sub(r"%\((\w+)\)s", lambda m: literals[m.group(1)], sql)
        s.query(sql)
    columns = ", ".join(AttemptRow.__dataclass_fields__)
    literal = {"int": "0", "tuple[str, ...]": "[]"}
    values = ", ".join(literal.get(str(f.type), "'x'")
                       for f in AttemptRow.__dataclass_fields__.values())
    s.query(f"INSERT INTO {db}.runs (scheduled_at, {columns}) VALUES (now(), {values})")
    assert s.query(f"SELECT count() FROM {db}.runs FINAL", "CSV").bytes().strip() == b"1"


def test_reads_from_many_threads_at_once_each_get_their_answer(
        history: ClickHouseRunHistory) -> None:
    """The api reads the history from its server threads at once: each read gets its own
    answer (one shared connection broke under two: "Simultaneous queries on single
    connection detected", and a tenant's ListRuns failed as UNAVAILABLE)."""
    import threading

    job = str(uuid4())
    HistoryProjector(history).apply_batch(scheduled(str(uuid4()), job, T0))
    outcomes: list[str] = []
    lock = threading.Lock()

    def reads() -> None:
        for _ in range(20):
            try:
                runs, _ = history.list_runs(RunFilter(job_id=job), 10, None)
                [(slept,)] = history.execute("SELECT sleep(0.01) + 1")
                outcome = f"{len(runs)} run, {slept}"
            except Exception as exc:  # counted: the assertion names it
                outcome = repr(exc)
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=reads) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert outcomes == ["1 run, 1"] * 160, sorted(set(outcomes))
