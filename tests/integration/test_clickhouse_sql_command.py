"""`cronlog sql` against the real ClickHouse (18.16 from Debian): a query runs with the
configured credentials, a write is refused by the server, errors are one clear line; the
interactive client signs in from its config file. Per-tenant analysts:
test_analyst_access.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.sql import CLIENT_BINARIES, client_argv, client_config

pytestmark = pytest.mark.integration
CRONLOG = Path(sys.executable).parent / "cronlog"
INSERT_JOB = "INSERT INTO {db}.jobs (created_at, tenant, job_id, name, version) VALUES"


@pytest.fixture
def history(isolated: Settings) -> Iterator[ClickHouseRunHistory]:
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    at = datetime(2026, 1, 1)
    store.execute(INSERT_JOB.format(db=store.database),
                  [(at, "acme", "j1", "nightly\treport", 1), (at, "beta", "j2", "backup", 1)])
    yield store
    store.execute(f"DROP DATABASE IF EXISTS {store.database}")


def env_of(settings: Settings, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    return {**keep, "CRONLOG_CLICKHOUSE_HOST": settings.clickhouse_host,
            "CRONLOG_CLICKHOUSE_PORT": str(settings.clickhouse_port),
            "CRONLOG_CLICKHOUSE_USER": settings.clickhouse_user,
            "CRONLOG_CLICKHOUSE_PASSWORD": settings.clickhouse_password,
            "CRONLOG_CLICKHOUSE_DATABASE": settings.clickhouse_database, **extra}


def cronlog(settings: Settings, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRONLOG), *args], env=env_of(settings, **extra),
                          capture_output=True, text=True, timeout=60, check=False)


def jobs(history: ClickHouseRunHistory) -> list[tuple[str, str]]:
    return sorted(history.execute(f"SELECT tenant, name FROM {history.database}.jobs"))


def test_a_query_runs_with_the_configured_credentials(history: ClickHouseRunHistory,
                                                      isolated: Settings) -> None:
    done = cronlog(isolated, "sql", "--format", "tsv",
                   "SELECT tenant, name, version FROM jobs ORDER BY tenant")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "tenant\tname\tversion\nacme\tnightly\\treport\t1\nbeta\tbackup\t1\n"
    table = cronlog(isolated, "sql", "--format", "table", "SELECT count() AS jobs FROM jobs")
    assert table.stdout.splitlines()[0].strip() == "jobs"
    assert table.stdout.splitlines()[-1].strip() == "2"


@pytest.mark.parametrize("statement", [
    "INSERT INTO jobs (tenant, job_id, name) SELECT 'beta', 'j3', 'planted'",
    "ALTER TABLE jobs DELETE WHERE 1",
    "DROP TABLE jobs",
    "SET readonly = 0",
    "CREATE TABLE planted (x UInt8) ENGINE = Memory",
])
def test_a_write_is_refused_by_the_server(history: ClickHouseRunHistory, isolated: Settings,
                                          statement: str) -> None:
    before = jobs(history)
    done = cronlog(isolated, "sql", statement)
    assert done.returncode == 1
    assert done.stderr.startswith("cronlog sql: error: ClickHouse at ")
    assert "readonly" in done.stderr.lower()
    assert "Traceback" not in done.stderr and "Stack trace" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert jobs(history) == before
    assert [t for (t,) in history.execute(
        "SELECT name FROM system.tables WHERE database = %(db)s AND name = 'planted'",
        {"db": history.database})] == []


def test_a_wrong_password_or_query_is_one_clear_line(history: ClickHouseRunHistory,
                                                     isolated: Settings) -> None:
    wrong = cronlog(isolated, "sql", "SELECT 1", CRONLOG_CLICKHOUSE_PASSWORD="wrong")
    assert wrong.returncode == 1
    assert "Traceback" not in wrong.stderr and "wrong" not in wrong.stderr
    assert f"as {isolated.clickhouse_user}" in wrong.stderr
    bad = cronlog(isolated, "sql", "SELECT nope FROM jobs")
    assert bad.returncode == 1 and "nope" in bad.stderr and "Traceback" not in bad.stderr


def test_the_interactive_client_signs_in_from_its_config_file(
        history: ClickHouseRunHistory, isolated: Settings) -> None:
    binary = next((list(b) for b in CLIENT_BINARIES
                   if subprocess.run(["which", b[0]], capture_output=True).returncode == 0),
                  None)
    if binary is None:
        pytest.skip("no clickhouse-client on this machine")
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "client.xml"
        config.write_text(client_config(isolated))
        argv = client_argv(binary, isolated, config, readonly=True)
        assert isolated.clickhouse_password not in " ".join(argv)
        read = subprocess.run([*argv, "--query", "SELECT count() FROM jobs"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert (read.returncode, read.stdout.strip()) == (0, "2"), read.stderr
        write = subprocess.run([*argv, "--query", "DROP TABLE jobs"],
                               capture_output=True, text=True, timeout=60, check=False)
        assert write.returncode != 0 and "readonly" in write.stderr.lower()
    assert len(jobs(history)) == 2
