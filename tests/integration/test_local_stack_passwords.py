"""The local stack's Postgres and ClickHouse refuse anyone without the stack's password."""

from __future__ import annotations

import stat
import urllib.error
import urllib.request

import psycopg
import pytest
from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError

from cronlog.infra.config import Settings
from cronlog_dev.stack.local_stack import LocalStack

pytestmark = pytest.mark.integration


@pytest.fixture
def stack(local_stack: LocalStack | None) -> LocalStack:
    if local_stack is None:
        pytest.skip("the servers are not this session's own (CRONLOG_TEST_* names running ones)")
    return local_stack


def test_the_passwords_are_kept_in_the_state_folder_for_the_owner_only(stack: LocalStack) -> None:
    folder = stack.state_dir / "secrets"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("postgres-password", "clickhouse-password"):
        path = folder / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert len(path.read_text().strip()) == 48
    settings = stack.settings()
    assert settings.clickhouse_password == (folder / "clickhouse-password").read_text().strip()
    assert settings.postgres_dsn == stack.postgres.dsn  # the same on every call


def test_postgres_refuses_connections_without_the_password(stack: LocalStack,
                                                           stack_settings: Settings) -> None:
    port = stack.ports.postgres
    for dsn in (f"postgresql://cronlog@127.0.0.1:{port}/cronlog",
                f"postgresql://cronlog:wrong@127.0.0.1:{port}/cronlog",
                f"postgresql://postgres@127.0.0.1:{port}/postgres"):
        with pytest.raises(psycopg.OperationalError,
                           match=r"password|authentication|does not exist"):
            psycopg.connect(dsn, connect_timeout=5).close()
    with psycopg.connect(stack_settings.postgres_dsn, connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_clickhouse_refuses_connections_without_the_password(stack: LocalStack,
                                                             stack_settings: Settings) -> None:
    port = stack.ports.clickhouse_tcp
    for user, password in (("default", ""), ("cronlog", ""), ("cronlog", "wrong")):
        with pytest.raises(ClickHouseError):
            Client("127.0.0.1", port=port, user=user, password=password,
                   connect_timeout=5).execute("SELECT 1")
    client = Client("127.0.0.1", port=port, user=stack_settings.clickhouse_user,
                    password=stack_settings.clickhouse_password, connect_timeout=5)
    assert client.execute("SELECT 1") == [(1,)]


def test_clickhouse_http_refuses_queries_without_the_password(stack: LocalStack,
                                                              stack_settings: Settings) -> None:
    url = f"http://127.0.0.1:{stack.ports.clickhouse_http}/"
    for query in (b"SELECT 1", b"SELECT 1 FORMAT TabSeparated"):
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(urllib.request.Request(url, data=query), timeout=5).read()
    authed = urllib.request.Request(url, data=b"SELECT 1", headers={
        "X-ClickHouse-User": stack_settings.clickhouse_user,
        "X-ClickHouse-Key": stack_settings.clickhouse_password})
    with urllib.request.urlopen(authed, timeout=5) as response:
        assert response.read().strip() == b"1"


def test_a_postgres_data_folder_made_without_passwords_is_locked_at_its_next_start() -> None:
    """Stacks started before the passwords existed had `trust` for every host connection."""
    import shutil
    import socket
    import uuid

    from cronlog_dev.stack.postgres_server import PostgresServer, _pg_bin
    from cronlog_dev.stack.process import run_checked
    from tests.conftest import ROOT

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    # Under the repo's state folder: the postgres system user cannot enter pytest's tmp_path.
    state = ROOT / ".cronlog" / f"test-pg-upgrade-{uuid.uuid4().hex[:8]}"
    server = PostgresServer(state, port, password="0123abcd" * 6)
    data = state / "pg-data"
    data.mkdir(parents=True)
    owner = server._as_owner()
    if owner:
        shutil.chown(data, owner, owner)
    run_checked([str(_pg_bin() / "initdb"), "-D", str(data), "-U", "cronlog", "--auth=trust",
                 "-E", "UTF8", "--no-sync"], "initdb", user=owner)
    try:
        server.start()
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(f"postgresql://cronlog@127.0.0.1:{port}/cronlog",
                            connect_timeout=5).close()
        with psycopg.connect(server.dsn, connect_timeout=5) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("cronlog",)
    finally:
        server.stop()
        shutil.rmtree(state, ignore_errors=True)
