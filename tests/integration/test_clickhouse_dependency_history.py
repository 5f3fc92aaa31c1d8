"""Dependencies in the ClickHouse history (issue 16), on the real server (18.16 from Debian)
and on a current engine (chdb): the chain columns of RunScheduled v3, RunMissed v2 and
RunSkipped v2 and the dependency events of the job log, each through the Avro codec and the
projectors; an older database brought up to date; docs/analytics.md's two dependency
queries on a chain of real rows."""

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
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.history import HistoryProjector
from cronlog.projections.job_history import JobHistoryProjector
from tests.support.chdb_engine import chdb_session
from tests.unit.avro.examples import SPEC_V4

pytestmark = pytest.mark.integration
DOC = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"
DOC_START_JOB = "11111111-1111-1111-1111-111111111111"
DOC_LOGICAL_TIME = "2026-03-01 02:00:00"
CODEC = AvroCodec()
Event = tuple[str, dict[str, Any]]


def doc_query(title: str) -> str:
    found = re.search(rf"## {re.escape(title)}\n.*?```sql\n(.*?)```", DOC.read_text(), flags=re.S)
    assert found, title
    return found.group(1)


def coded(name: str, record: dict[str, Any]) -> Event:
    """The record as a projector gets it from the log: encoded with the newest version of
    its schema (the versions issue 16 added), decoded by the newest reader."""
    return CODEC.decode(CODEC.encode(name, record))


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


def projector(store: ClickHouseRunHistory) -> CombinedHistoryProjector:
    return CombinedHistoryProjector(HistoryProjector(store), JobHistoryProjector(store))


def job_created(job_id: UUID, tenant: str, at: datetime, after: list[UUID] | None) -> Event:
    spec = {**SPEC_V4, "name": f"job-{str(job_id)[:4]}", "tenant": tenant,
            "after": None if after is None else {"job_ids": after, "condition": "success",
                                                  "wait_window_ms": 3_600_000}}
    # The newest Schedule record has every_ms (interval schedules), the newest JobSpec
    # exclusions and a calendar (issue 20), and a notify rule (issue 37).
    spec["schedule"] = {**spec["schedule"], "every_ms": None}
    spec = {**spec, "exclusions": [], "calendar": None, "notify": None}
    if after is None:
        spec = {**spec, "schedule": {"kind": "cron", "cron": "0 2 * * *", "at": None,
                                     "every_ms": None}}
    return coded("JobCreated", {"job_id": job_id, "version": 1, "at": at, "request_id": "r",
                                "spec": spec, "next_fire_at": None if after else at})


def chain_run(job_id: UUID, tenant: str, logical: datetime, start_s: float, end_s: float,
              upstreams: list[UUID], depth: int) -> tuple[UUID, list[Event]]:
    """A run of the scheduled chain of `logical` that started and ended that many seconds
    after it; a dependency run when it has upstream runs."""
    run_id = uuid4()
    started = logical + timedelta(seconds=start_s)
    scheduled = logical if not upstreams else started - timedelta(milliseconds=100)
    base = {"run_id": run_id, "job_id": job_id}
    return run_id, [
        coded("RunScheduled", {
            **base, "version": 1, "at": scheduled, "tenant": tenant, "queue": "q",
            "handler": "h", "scheduled_at": scheduled, "not_before": scheduled,
            "trigger": "dependency" if upstreams else "schedule", "max_attempts": 1,
            "attempt": 1, "timeout_ms": 60_000,
            "logical_time": logical if upstreams else None, "cascade": "",
            "upstream_run_ids": upstreams, "depth": depth}),
        coded("AttemptStarted", {**base, "version": 2, "at": started, "attempt": 1,
                                 "worker": "w", "started_at": started}),
        coded("AttemptSucceeded", {**base, "version": 3, "at": started, "attempt": 1,
                                   "worker": "w", "finished_at": logical + timedelta(
                                       seconds=end_s), "output": b"", "output_truncated": False,
                                   "started_at": None}),
    ]


def upstream_recorded(job_id: UUID, version: int, upstream_job: UUID, upstream_run: UUID,
                      logical: datetime, at: datetime, folded: str) -> Event:
    return coded("JobUpstreamRecorded", {
        "job_id": job_id, "version": version, "at": at, "request_id": None,
        "upstream_job_id": upstream_job, "upstream_run_id": upstream_run,
        "status": "succeeded", "logical_time": logical, "cascade": "", "depth": 0,
        "folded": folded, "opened_at": at, "reason": None})


def test_every_new_record_version_reaches_its_columns(history: ClickHouseRunHistory) -> None:
    tenant, at = "acme", datetime(2026, 3, 1, 2, 0, 0, 250_000, tzinfo=UTC)
    upstream, dependent = uuid4(), uuid4()
    up_run, dep_run, missed_run, skipped_run = uuid4(), uuid4(), uuid4(), uuid4()
    cascade = "req-" + uuid4().hex[:6]
    run_common = {"tenant": tenant, "queue": "q", "handler": "h"}
    events = [
        job_created(upstream, tenant, at, None),
        job_created(dependent, tenant, at, [upstream]),
        coded("JobDependentLinked", {"job_id": upstream, "version": 2, "at": at,
                                     "request_id": None, "dependent_job_id": dependent,
                                     "dependents": [dependent]}),
        coded("JobUpstreamRecorded", {
            "job_id": dependent, "version": 2, "at": at + timedelta(seconds=5),
            "request_id": None, "upstream_job_id": upstream, "upstream_run_id": up_run,
            "status": "succeeded", "logical_time": at, "cascade": cascade, "depth": 0,
            "folded": "decided", "opened_at": at + timedelta(seconds=5), "reason": None}),
        coded("JobUpstreamUnavailable", {"job_id": dependent, "version": 3,
                                         "at": at + timedelta(seconds=6), "request_id": None,
                                         "upstream_job_id": upstream, "reason": "job deleted"}),
        coded("JobDependentUnlinked", {"job_id": upstream, "version": 3,
                                       "at": at + timedelta(seconds=7), "request_id": "r2",
                                       "dependent_job_id": dependent, "dependents": []}),
        coded("RunScheduled", {
            "run_id": dep_run, "job_id": dependent, "version": 1,
            "at": at + timedelta(seconds=5), **run_common,
            "scheduled_at": at + timedelta(seconds=5), "not_before": at + timedelta(seconds=5),
            "trigger": "dependency", "max_attempts": 2, "attempt": 1, "timeout_ms": 1000,
            "logical_time": at, "cascade": cascade, "upstream_run_ids": [up_run], "depth": 1}),
        coded("RunMissed", {
            "run_id": missed_run, "job_id": dependent, "version": 1,
            "at": at + timedelta(hours=1), **run_common, "scheduled_at": at + timedelta(hours=1),
            "reason": "upstream job(s) x did not end within the wait window",
            "trigger": "dependency", "logical_time": at - timedelta(days=1), "cascade": "",
            "upstream_run_ids": [up_run, dep_run], "depth": 2}),
        coded("RunSkipped", {
            "run_id": skipped_run, "job_id": upstream, "version": 1, "at": at, **run_common,
            "scheduled_at": at, "reason": "overlap policy skip", "trigger": "schedule",
            "logical_time": None, "cascade": None, "upstream_run_ids": [], "depth": 0}),
    ]
    projector(history).apply_batch(events)
    projector(history).apply_batch(events)  # redelivered: the same rows

    chain = "trigger, logical_time, logical_time_us, cascade, upstream_run_ids, depth, run_status"
    rows = {r[0]: r[1:] for r in history.execute(
        f"SELECT run_id, {chain} FROM {history.database}.runs FINAL")}
    us = int(at.timestamp()) * 1_000_000 + 250_000
    day = 86_400 * 1_000_000
    assert rows[str(dep_run)] == ("dependency", at.replace(microsecond=0, tzinfo=None), us,
                                  cascade, [str(up_run)], 1, "scheduled")
    assert rows[str(missed_run)] == (
        "dependency", (at - timedelta(days=1)).replace(microsecond=0, tzinfo=None), us - day,
        "", [str(up_run), str(dep_run)], 2, "missed")
    assert rows[str(skipped_run)] == ("schedule", at.replace(microsecond=0, tzinfo=None), us,
                                      None, [], 0, "skipped")
    assert history.get_run(str(dep_run))[0].upstream_run_ids == (str(up_run),)

    deps = history.dependency_events(tenant, str(dependent))
    assert [(d.event_type, d.upstream_job_id, d.upstream_run_id, d.upstream_status, d.folded,
             d.cascade, d.logical_time_us, d.reason) for d in deps] == [
        ("JobUpstreamRecorded", str(upstream), str(up_run), "succeeded", "decided", cascade,
         us, ""),
        ("JobUpstreamUnavailable", str(upstream), "", "", "", "", 0, "job deleted")]
    links = history.dependency_events(tenant, str(upstream))
    assert [(d.event_type, d.dependent_job_id, d.version) for d in links] == [
        ("JobDependentLinked", str(dependent), 2), ("JobDependentUnlinked", str(dependent), 3)]
    assert history.execute(f"SELECT count() FROM {history.database}.dependency_events FINAL"
                           )[0][0] == 4, "one row per event, redelivered or not"

    job = history.latest_job_rows([str(dependent)])[str(dependent)]
    assert (job.status, job.after_job_ids, job.after_condition, job.wait_window_ms) == (
        "active", (str(upstream),), "success", 3_600_000)
    up = history.latest_job_rows([str(upstream)])[str(upstream)]
    assert (up.dependent_job_ids, up.version) == ((), 3), "linked, then unlinked"


OLD_RUNS = """
CREATE TABLE {db}.runs
(
    scheduled_at DateTime, scheduled_at_us Int64, tenant String, job_id String,
    run_id String, attempt UInt32, queue String, handler String, trigger String,
    max_attempts UInt32, run_status String, attempt_status String, not_before_us Int64,
    dispatched_at_us Int64, started_at_us Int64, finished_at_us Int64, start_lag_us Int64,
    worker String, output String, output_truncated UInt8, error String, reason String,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMMDD(scheduled_at)
ORDER BY (tenant, job_id, scheduled_at, run_id, attempt)
"""


def test_a_database_from_before_dependencies_is_brought_up_to_date(
        history: ClickHouseRunHistory, stack_settings: Settings) -> None:
    db = history.database
    history.execute(f"DROP TABLE {db}.runs")
    history.execute(OLD_RUNS.replace("{db}", db))
    history.execute(f"INSERT INTO {db}.runs (scheduled_at, scheduled_at_us, run_id, version) "
                    "VALUES", [(datetime(2026, 3, 1, 2), 1772330400000000, "old", 1)])
    history.ensure_schema()
    history.ensure_schema()  # again, as every process does at start: nothing to add
    assert history.execute(
        f"SELECT logical_time_us, cascade, upstream_run_ids, depth, progress, progress_at_us "
        f"FROM {db}.runs WHERE run_id = 'old'") == [(1772330400000000, None, [], 0, "", 0)]
    fresh = {(t, n, ty) for t, n, ty in history.execute(
        "SELECT table, name, type FROM system.columns WHERE database = %(db)s "
        "AND table = 'runs'", {"db": db})}
    st = stack_settings
    other = ClickHouseRunHistory(st.clickhouse_host, st.clickhouse_port, db + "_new",
                                 st.clickhouse_user, st.clickhouse_password)
    other.ensure_schema()
    try:
        made = {(t, n, ty) for t, n, ty in history.execute(
            "SELECT table, name, type FROM system.columns WHERE database = %(db)s "
            "AND table = 'runs'", {"db": other.database})}
    finally:
        history.execute(f"DROP DATABASE IF EXISTS {other.database}")
    assert fresh == made


def chain_rows(history: ClickHouseRunHistory, tenant: str, logical: datetime
               ) -> dict[str, UUID]:
    """A -> B -> C, D after B and C, and F after D and E (E another chain of the same
    logical time, which ends last): the critical path of A's chain is A, B, C, D."""
    jobs = {name: uuid4() for name in "ABCDEF"}
    runs: dict[str, UUID] = {}
    events: list[Event] = [job_created(j, tenant, logical, None) for j in jobs.values()]
    runs["A"], a = chain_run(jobs["A"], tenant, logical, 1, 10, [], 0)
    runs["E"], e = chain_run(jobs["E"], tenant, logical, 0, 100, [], 0)
    runs["B"], b = chain_run(jobs["B"], tenant, logical, 12, 20, [runs["A"]], 1)
    runs["C"], c = chain_run(jobs["C"], tenant, logical, 21, 40, [runs["B"]], 2)
    runs["D"], d = chain_run(jobs["D"], tenant, logical, 45, 50, [runs["B"], runs["C"]], 3)
    runs["F"], f = chain_run(jobs["F"], tenant, logical, 101, 130, [runs["D"], runs["E"]], 4)
    projector(history).apply_batch([*events, *a, *e, *b, *c, *d, *f])
    return {**{f"job {k}": v for k, v in jobs.items()}, **runs}


def test_critical_path_of_a_chain(history: ClickHouseRunHistory) -> None:
    tenant, logical = "acme-" + uuid4().hex[:6], datetime(2026, 3, 1, 2, tzinfo=UTC)
    ids = chain_rows(history, tenant, logical)
    query = (doc_query("Critical path of a chain").replace("cronlog.", f"{history.database}.")
             .replace("'acme'", f"'{tenant}'").replace(DOC_START_JOB, str(ids["job A"])))
    assert DOC_LOGICAL_TIME in query
    rows = history.execute(query)
    assert [(step, job, run, depth, wait, took) for step, _, job, run, depth, _, _, wait, took, _
            in rows] == [
        (1, str(ids["job A"]), str(ids["A"]), 0, 0, 9),
        (2, str(ids["job B"]), str(ids["B"]), 1, 2, 8),
        (3, str(ids["job C"]), str(ids["C"]), 2, 1, 19),
        (4, str(ids["job D"]), str(ids["D"]), 3, 5, 5),  # waited on C, which ended last
    ]
    from_e = history.execute(query.replace(str(ids["job A"]), str(ids["job E"])))
    assert [(r[2], r[7]) for r in from_e] == [(str(ids["job E"]), 0), (str(ids["job F"]), 1)]
    assert history.execute(query.replace(DOC_LOGICAL_TIME, "2026-03-02 02:00:00")) == []


def test_dependent_runs_waiting(history: ClickHouseRunHistory) -> None:
    tenant = "acme-" + uuid4().hex[:6]
    now = datetime.now(UTC).replace(microsecond=0)
    logical = now - timedelta(hours=2)
    a, b, c, waiting, done, closed = (uuid4() for _ in range(6))
    a_run, b_run = uuid4(), uuid4()
    events = [job_created(j, tenant, logical, None) for j in (a, b, c)]
    events += [job_created(j, tenant, logical, [a, b, c]) for j in (waiting, done, closed)]
    opened = now - timedelta(minutes=30)
    # waiting: A and B ended for the logical time, C not yet.
    events += [upstream_recorded(waiting, 2, a, a_run, logical, opened, "waiting"),
               upstream_recorded(waiting, 3, b, b_run, logical, opened, "waiting"),
               # an earlier logical time of the same job, settled by its MISSED run
               upstream_recorded(waiting, 4, a, uuid4(), logical - timedelta(days=1), opened,
                                 "waiting")]
    # done: all three ended, decided, its dependency run written.
    events += [upstream_recorded(done, 2, a, a_run, logical, opened, "waiting"),
               upstream_recorded(done, 3, b, b_run, logical, opened, "decided")]
    # closed: an end that did not meet the condition.
    events += [upstream_recorded(closed, 2, a, a_run, logical, opened, "closed")]
    missed = coded("RunMissed", {
        "run_id": uuid4(), "job_id": waiting, "version": 1, "at": now, "tenant": tenant,
        "queue": "q", "handler": "h", "scheduled_at": now, "reason": "window",
        "trigger": "dependency", "logical_time": logical - timedelta(days=1), "cascade": "",
        "upstream_run_ids": [], "depth": 1})
    projector(history).apply_batch(events)
    projector(history).apply_batch([missed])
    rows = history.execute(doc_query("Dependent runs waiting")
                           .replace("cronlog.", f"{history.database}."))
    mine = [r for r in rows if r[0] == tenant]
    assert len(mine) == 1, mine
    (_, job_id, name, logical_time, cascade, first_end, waited, window_ends, ended,
     missing) = mine[0]
    assert sorted(ended) == sorted([str(a), str(b)])
    assert job_id == str(waiting) and name.startswith("job-")
    assert logical_time == logical.replace(tzinfo=None) and cascade == ""
    assert first_end == opened.replace(tzinfo=None)
    assert 30 * 60 <= waited < 40 * 60
    assert window_ends == (opened + timedelta(hours=1)).replace(tzinfo=None)
    assert missing == [str(c)]


def test_ddl_and_dependency_queries_run_on_a_current_engine() -> None:
    from importlib.resources import files

    s = chdb_session()
    package = files("cronlog.infra.clickhouse")
    for statement in _split_statements(package.joinpath("schema.sql").read_text()):
        s.query(statement.replace("{db}", "cronlog"))
    for title in ("Critical path of a chain", "Dependent runs waiting"):
        s.query(doc_query(title))
    # schema_columns.sql's statements are valid there too (on a table without the columns)
    s.query("CREATE DATABASE old")
    s.query(OLD_RUNS.replace("{db}", "old"))
    for statement in _split_statements(package.joinpath("schema_columns.sql").read_text()):
        if ".runs " in statement:
            s.query(statement.replace("{db}", "old"))
