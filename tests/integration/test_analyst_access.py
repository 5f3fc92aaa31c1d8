"""Per-tenant analysts against the real ClickHouse (Debian's 18.16 in the local stack): each
analyst, signed in as itself over the native protocol, reads its tenant's rows of every
copied table and none of another tenant's, rows written after provisioning included; it
reaches neither the history database nor another tenant's, changes no setting, calls no
table function, writes nothing. Retention drops a day in the copies too; a rebuild's swap
makes the copies again from the new tables; a removed analyst loses its user and database."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError

from cronlog.infra.clickhouse.analyst_access import (
    AnalystAccessUnsupported,
    check,
    provision_analysts,
)
from cronlog.infra.clickhouse.analyst_users import sql_statements
from cronlog.infra.clickhouse.history_swap import swap_in
from cronlog.infra.clickhouse.rejected_events import ClickHouseRejectedEvents
from cronlog.infra.clickhouse.retention import HistoryRetention
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.clickhouse.tenant_copies import rebuild_statements, resync_after_swap
from cronlog.infra.composition import build_run_history
from cronlog.infra.config import Analyst, Settings
from cronlog.projections.job_timeline import JobEventRow
from tests.support.chdb_engine import chdb_session
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration
CRONLOG = Path(sys.executable).parent / "cronlog"
PASSWORD = "analyst-password-0123456789"
COPIED = ["alert_deliveries", "dependency_events", "job_events", "jobs", "missed_fire_times",
          "run_events", "run_keys", "runs"]


@pytest.fixture
def users_dir(local_stack: Any) -> str:
    if local_stack is not None:
        return str(local_stack.clickhouse.users_dir)
    folder = os.environ.get("CRONLOG_TEST_CLICKHOUSE_USERS_DIR", "")
    if not folder:
        pytest.skip("the running ClickHouse's users.d is not named "
                    "(CRONLOG_TEST_CLICKHOUSE_USERS_DIR)")
    return folder


@pytest.fixture
def settings(isolated: Settings, users_dir: str) -> Iterator[Settings]:
    settings = isolated.with_overrides(clickhouse_users_dir=users_dir)
    history = build_run_history(settings)
    history.ensure_schema()
    ClickHouseRejectedEvents(history).ensure_schema()
    # Every copied table gets a row of each tenant (their days 1970-01-01: defaults).
    for table in COPIED:
        history.execute(f"INSERT INTO {history.database}.{table} (tenant, job_id) VALUES",
                        [("acme", "a0"), ("beta", "b0")])
    history.execute(f"INSERT INTO {history.database}.rejected_events (event_type) VALUES",
                    [("planted",)])
    yield settings
    provision(settings, [])
    history.execute(f"DROP DATABASE IF EXISTS {history.database}")


def provision(settings: Settings, analysts: list[Analyst]) -> list[str]:
    history = build_run_history(settings)
    return provision_analysts(settings, history, analysts, check(settings, history, analysts))


def tag() -> str:
    return uuid.uuid4().hex[:8]


def client(settings: Settings, user: str, database: str) -> Client:
    return Client(host=settings.clickhouse_host, port=settings.clickhouse_port, user=user,
                  password=PASSWORD, database=database, connect_timeout=5)


def signs_in(settings: Settings, user: str, database: str) -> bool:
    try:
        client(settings, user, database).execute("SELECT 1")
        return True
    except (ClickHouseError, OSError, EOFError):
        return False


def test_each_analyst_reads_its_tenant_rows_only(settings: Settings) -> None:
    db = settings.clickhouse_database
    acme, beta = f"acme_{tag()}", f"beta_{tag()}"
    report = provision(settings, [Analyst("acme", acme, PASSWORD),
                                  Analyst("beta", beta, PASSWORD)])
    assert any(line.startswith(f"analyst {acme}: tenant acme, reads database {db}_tenant_acme")
               for line in report), report
    assert "never copied for analysts (no tenant column): rejected_events" in report
    analyst = client(settings, acme, f"{db}_tenant_acme")
    tables = sorted(t for (t,) in analyst.execute("SHOW TABLES") if not t.endswith("_feed"))
    assert tables == COPIED
    for table in COPIED:
        assert analyst.execute(f"SELECT tenant, job_id FROM {table} FINAL") == [("acme", "a0")]
    # Written after provisioning: through the projector's insert path and a plain insert.
    history = build_run_history(settings)
    now_us = int(datetime.now(UTC).timestamp() * 1_000_000)
    history.write_job_events([JobEventRow(now_us, t, f"{t}-new", 1, "JobCreated", "r", "a", "s")
                              for t in ("acme", "beta")])
    history.execute(f"INSERT INTO {db}.runs (tenant, job_id) VALUES",
                    [("acme", "a1"), ("beta", "b1")])
    assert sorted(analyst.execute("SELECT tenant, job_id FROM job_events FINAL")) == [
        ("acme", "a0"), ("acme", "acme-new")]
    assert sorted(analyst.execute("SELECT tenant, job_id FROM runs FINAL")) == [
        ("acme", "a0"), ("acme", "a1")]
    other = client(settings, beta, f"{db}_tenant_beta")
    assert sorted(other.execute("SELECT DISTINCT tenant FROM runs")) == [("beta",)]


# Each refused query and words of the server's answer. One provisioning serves them all: it
# waits for the server to load the users file, which made each case seconds long.
REFUSED = [
    ("SELECT count() FROM {db}.runs", "Access denied to database {db}"),
    ("SELECT count() FROM {db}_tenant_beta.runs", "Access denied to database {db}_tenant_beta"),
    ("SELECT count() FROM {db}.rejected_events", "Access denied"),
    ("USE {db}", "Access denied"),
    ("SET readonly = 0", "readonly"),
    ("SELECT 1 SETTINGS readonly = 0", "readonly"),
    ("SELECT count() FROM merge('{db}', '^runs$')", "Table functions are forbidden"),
    ("SELECT count() FROM remote('{host}:{port}', {db}.runs, '{service}', '{password}')",
     "Table functions are forbidden"),
    ("SELECT count() FROM cluster('test_shard_localhost', {db}.runs)",
     "Table functions are forbidden"),
    ("SELECT * FROM url('http://127.0.0.1:1/', TSV, 'x String')",
     "Table functions are forbidden"),
    ("SELECT * FROM file('x.tsv', TSV, 'x String')", "Table functions are forbidden"),
    ("INSERT INTO runs (tenant, job_id) SELECT 'beta', 'planted'", "readonly"),
    ("CREATE TEMPORARY TABLE t (x UInt8)", "readonly"),
    ("DROP TABLE runs_feed", "readonly"),
    ("OPTIMIZE TABLE runs", "readonly"),
]


def test_an_analyst_reaches_nothing_else(settings: Settings) -> None:
    db = settings.clickhouse_database
    acme = f"acme_{tag()}"
    provision(settings, [Analyst("acme", acme, PASSWORD), Analyst("beta", f"beta_{tag()}",
                                                                  PASSWORD)])
    parts = {"db": db, "host": settings.clickhouse_host, "port": settings.clickhouse_port,
             "service": settings.clickhouse_user, "password": settings.clickhouse_password}
    answered_otherwise = []
    for query, words in REFUSED:
        analyst = client(settings, acme, f"{db}_tenant_acme")
        try:
            analyst.execute(query.format(**parts))
        except ClickHouseError as refusal:
            if words.format(**parts) not in str(refusal):
                answered_otherwise.append(f"{query}: refused as {refusal}")
        else:
            answered_otherwise.append(f"{query}: not refused")
        finally:
            analyst.disconnect()
    assert not answered_otherwise, "\n".join(answered_otherwise)
    history = build_run_history(settings)
    assert history.execute(f"SELECT count() FROM {db}_tenant_acme.runs WHERE tenant != 'acme'"
                           ) == [(0,)]
    # What 18.16 shows every user of its system tables is kept to its own databases.
    analyst = client(settings, acme, f"{db}_tenant_acme")
    assert {d for (d,) in analyst.execute("SELECT name FROM system.databases")} == {
        f"{db}_tenant_acme", "system"}
    assert analyst.execute("SELECT count() FROM system.parts WHERE database = %(db)s",
                           {"db": db}) == [(0,)]
    assert analyst.execute("SELECT count() FROM system.columns WHERE database = %(db)s",
                           {"db": db}) == [(0,)]


def test_retention_drops_a_day_in_the_copies_too(settings: Settings) -> None:
    db = settings.clickhouse_database
    history = build_run_history(settings)
    old = datetime(2020, 1, 2)
    history.execute(f"INSERT INTO {db}.runs (scheduled_at, tenant, job_id) VALUES",
                    [(old, "acme", "old"), (datetime.now(UTC).replace(tzinfo=None), "acme",
                                            "new")])
    provision(settings, [Analyst("acme", f"acme_{tag()}", PASSWORD)])
    copy = f"`{db}_tenant_acme`.runs"
    assert history.execute(f"SELECT count() FROM {copy} WHERE job_id = 'old'") == [(1,)]
    dropped = HistoryRetention(history, timedelta(days=90)).run(datetime.now(UTC))
    assert ("runs", 20200102) in dropped
    assert (f"{db}_tenant_acme.runs", 20200102) in dropped
    assert sorted(history.execute(f"SELECT job_id FROM {copy} WHERE tenant = 'acme'")) == [
        ("new",)]


def test_a_rebuilds_swap_makes_the_copies_again_from_the_new_tables(
        settings: Settings) -> None:
    db = settings.clickhouse_database
    acme = f"acme_{tag()}"
    provision(settings, [Analyst("acme", acme, PASSWORD)])
    live = build_run_history(settings)
    rebuilt = ClickHouseRunHistory(settings.clickhouse_host, settings.clickhouse_port,
                                   f"{db}_rebuild_{tag()}", settings.clickhouse_user,
                                   settings.clickhouse_password)
    rebuilt.ensure_schema()
    ClickHouseRejectedEvents(rebuilt).ensure_schema()
    rebuilt.execute(f"INSERT INTO {rebuilt.database}.runs (tenant, job_id) VALUES",
                    [("acme", "rebuilt"), ("beta", "rebuilt")])
    replaced = f"{db}_replaced_{tag()}"
    swap_in(live, rebuilt.database, replaced)
    assert resync_after_swap(live) == ["acme"]
    live.execute(f"INSERT INTO {db}.runs (tenant, job_id) VALUES",
                 [("acme", "after"), ("beta", "after")])
    analyst = client(settings, acme, f"{db}_tenant_acme")
    assert sorted(analyst.execute("SELECT tenant, job_id FROM runs FINAL")) == [
        ("acme", "after"), ("acme", "rebuilt")]
    live.execute(f"DROP DATABASE IF EXISTS {replaced}")


def test_a_new_history_column_rebuilds_the_copy_with_it(settings: Settings) -> None:
    db = settings.clickhouse_database
    acme = f"acme_{tag()}"
    provision(settings, [Analyst("acme", acme, PASSWORD)])
    history = build_run_history(settings)
    history.execute(f"ALTER TABLE {db}.runs ADD COLUMN note String DEFAULT 'n'")
    # The feed made before the column still passes the rows on (by its own columns).
    history.execute(f"INSERT INTO {db}.runs (tenant, job_id, note) VALUES", [("acme", "a1", "x")])
    report = provision(settings, [Analyst("acme", acme, PASSWORD)])
    assert any(line.endswith("; copied again: runs") for line in report), report
    history.execute(f"INSERT INTO {db}.runs (tenant, job_id, note) VALUES", [("acme", "a2", "y")])
    analyst = client(settings, acme, f"{db}_tenant_acme")
    assert sorted(analyst.execute("SELECT job_id, note FROM runs FINAL")) == [
        ("a0", "n"), ("a1", "x"), ("a2", "y")]


def env_of(settings: Settings, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    return {**keep, "CRONLOG_CLICKHOUSE_HOST": settings.clickhouse_host,
            "CRONLOG_CLICKHOUSE_PORT": str(settings.clickhouse_port),
            "CRONLOG_CLICKHOUSE_USER": settings.clickhouse_user,
            "CRONLOG_CLICKHOUSE_PASSWORD": settings.clickhouse_password,
            "CRONLOG_CLICKHOUSE_DATABASE": settings.clickhouse_database,
            "CRONLOG_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
            "CRONLOG_POSTGRES_DSN": settings.postgres_dsn,
            "CRONLOG_TOPIC_PREFIX": settings.topic_prefix,
            "CRONLOG_PARTITIONS": str(settings.partitions), **extra}


def cronlog_provision(settings: Settings, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRONLOG), "provision"], env=env_of(settings, **extra),
                          capture_output=True, text=True, timeout=120, check=False)


def test_cronlog_provision_adds_and_removes_an_analyst(settings: Settings) -> None:
    db = settings.clickhouse_database
    acme = f"acme_{tag()}"
    folder = {"CRONLOG_CLICKHOUSE_USERS_DIR": settings.clickhouse_users_dir}
    done = cronlog_provision(settings, CRONLOG_ANALYSTS=f"acme:{acme}",
                             **{f"CRONLOG_ANALYST_PASSWORD_{acme}": PASSWORD}, **folder)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    assert signs_in(settings, acme, f"{db}_tenant_acme")
    gone = cronlog_provision(settings, CRONLOG_ANALYSTS="", **folder)
    assert gone.returncode == 0, gone.stderr
    assert f"analyst {acme}: removed" in gone.stdout
    assert f"tenant database {db}_tenant_acme: dropped" in gone.stdout
    history = build_run_history(settings)
    assert history.execute("SELECT count() FROM system.databases WHERE name = %(n)s",
                           {"n": f"{db}_tenant_acme"}) == [(0,)]
    wait_for(lambda: not signs_in(settings, acme, "system"), 30, f"{acme} refused")


def test_without_a_users_folder_a_server_without_sql_users_is_refused_unchanged(
        settings: Settings) -> None:
    plain = settings.with_overrides(clickhouse_users_dir="")
    history = build_run_history(plain)
    if history.execute("SELECT count() FROM system.tables WHERE database = 'system' "
                       "AND name = 'users'") != [(0,)]:
        pytest.skip("this ClickHouse has SQL access control")
    with pytest.raises(AnalystAccessUnsupported, match="CRONLOG_CLICKHOUSE_USERS_DIR"):
        check(plain, history, [Analyst("acme", f"acme_{tag()}", PASSWORD)])
    user = f"acme_{tag()}"
    done = cronlog_provision(plain, CRONLOG_ANALYSTS=f"acme:{user}",
                             **{f"CRONLOG_ANALYST_PASSWORD_{user}": PASSWORD})
    assert done.returncode == 1
    assert "set CRONLOG_CLICKHOUSE_USERS_DIR" in done.stderr and "Nothing was changed" in \
        done.stderr
    assert PASSWORD not in done.stderr
    assert history.execute("SELECT count() FROM system.databases WHERE startsWith(name, %(p)s)",
                           {"p": f"{plain.clickhouse_database}_tenant_"}) == [(0,)]


def test_the_statements_run_on_a_current_engine() -> None:
    """chdb is current ClickHouse in-process: the copies' statements run, and the SQL
    users' parse (it has no users to make)."""
    engine = chdb_session()
    engine.query("CREATE DATABASE h")
    engine.query("CREATE TABLE h.runs (at DateTime, tenant String, v UInt64) "
                 "ENGINE = ReplacingMergeTree(v) PARTITION BY toYYYYMMDD(at) ORDER BY tenant")
    engine.query("INSERT INTO h.runs VALUES (now(), 'a.b-c', 1), (now(), 'beta', 1)")
    from cronlog.infra.clickhouse.tenant_copies import Column

    columns = [Column(n, "", "", "") for n in ("at", "tenant", "v")]
    for statement in rebuild_statements("h", "a.b-c", "runs", columns):
        engine.query(statement)
    engine.query("INSERT INTO h.runs VALUES (now(), 'a.b-c', 2), (now(), 'beta', 2)")
    assert str(engine.query("SELECT tenant, max(v) FROM `h_tenant_a.b-c`.runs FINAL "
                            "GROUP BY tenant", "CSV")).strip() == '"a.b-c",2'
    for statement in sql_statements("h", [Analyst("a.b-c", "abc", PASSWORD)], ["::1"],
                                    ["gone"]):
        engine.query(f"EXPLAIN AST {statement}")
