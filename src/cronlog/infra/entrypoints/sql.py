"""`cronlog sql [QUERY]`: a query on the run history with the configured ClickHouse
credentials, read-only; without QUERY, an interactive clickhouse-client signed in the same
way. Read-only is the server's doing: the session runs with readonly=1, so ClickHouse itself
refuses any write, DDL, SET or table function, whatever the query looks like."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO
from xml.sax.saxutils import escape

from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError
from clickhouse_driver.errors import ServerException

from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.sql_output import WRITERS

# A user already read-only (an analyst: readonly=1 in its profile) may not set readonly
# again, so the session asks for it only when the server has not imposed it.
CURRENT_READONLY = "SELECT value FROM system.settings WHERE name = 'readonly'"
READONLY = {"readonly": 1}
CLIENT_BINARIES = (("clickhouse-client",), ("clickhouse", "client"))


class SqlCommandError(RuntimeError):
    """The query could not run: the server refused it or could not be reached."""


def server_message(exc: BaseException) -> str:
    """The server's words without its stack trace (18.16 appends one to every error)."""
    if isinstance(exc, ServerException):
        message = exc.message.split("Stack trace:", 1)[0].strip()
        return f"Code: {exc.code}. {message}"
    return str(exc).strip() or type(exc).__name__


def connect(settings: Settings) -> Client:
    tls: dict[str, Any] = {}
    if settings.clickhouse_secure:
        tls = {"secure": True, "verify": settings.clickhouse_verify,
               "ca_certs": settings.clickhouse_ca_file or None}
    return Client(host=settings.clickhouse_host, port=settings.clickhouse_port,
                  user=settings.clickhouse_user, password=settings.clickhouse_password,
                  database=settings.clickhouse_database, connect_timeout=10,
                  send_receive_timeout=300, **tls)


def session_settings(client: Client) -> dict[str, int]:
    """The settings each query is sent with: readonly=1 unless the server already has the
    user read-only."""
    rows = client.execute(CURRENT_READONLY)
    return {} if rows and str(rows[0][0]) not in ("", "0") else dict(READONLY)


def _rows(client: Client, query: str, settings: dict[str, int]) -> tuple[list[str],
                                                                         Iterator[Sequence[Any]]]:
    result = iter(client.execute_iter(query, settings=settings, with_column_types=True))
    try:
        columns = next(result)
    except StopIteration:
        return [], iter(())
    return [name for name, _ in columns], result


def run_query(settings: Settings, query: str, fmt: str, out: TextIO) -> None:
    where = f"{settings.clickhouse_host}:{settings.clickhouse_port}"
    client = connect(settings)
    try:
        names, rows = _rows(client, query, session_settings(client))
        if names:
            for chunk in WRITERS[fmt](names, rows):
                out.write(chunk)
    except (ClickHouseError, OSError, EOFError) as exc:
        raise SqlCommandError(f"ClickHouse at {where} as {settings.clickhouse_user}: "
                              f"{server_message(exc)}") from None
    finally:
        client.disconnect()


def client_config(settings: Settings) -> str:
    """clickhouse-client's config file: the password goes here, not on its command line
    where `ps` would show it."""
    lines = ["<config>", f"  <user>{escape(settings.clickhouse_user)}</user>",
             f"  <password>{escape(settings.clickhouse_password)}</password>"]
    if settings.clickhouse_secure:
        mode = "strict" if settings.clickhouse_verify else "none"
        ca = (f"<caConfig>{escape(settings.clickhouse_ca_file)}</caConfig>"
              if settings.clickhouse_ca_file else "<loadDefaultCAFile>true</loadDefaultCAFile>")
        lines.append(f"  <openSSL><client>{ca}<verificationMode>{mode}</verificationMode>"
                     "<invalidCertificateHandler><name>RejectCertificateHandler</name>"
                     "</invalidCertificateHandler></client></openSSL>")
    return "\n".join([*lines, "</config>", ""])


def client_argv(binary: Sequence[str], settings: Settings, config: Path,
                readonly: bool) -> list[str]:
    argv = [*binary, f"--config-file={config}", f"--host={settings.clickhouse_host}",
            f"--port={settings.clickhouse_port}", f"--database={settings.clickhouse_database}"]
    if settings.clickhouse_secure:
        argv.append("--secure")
    if readonly:
        argv.append("--readonly=1")
    return argv


def _client_binary() -> list[str]:
    for argv in CLIENT_BINARIES:
        if shutil.which(argv[0]):
            return list(argv)
    raise SqlCommandError("clickhouse-client is not installed (Debian: apt-get install "
                          "clickhouse-client); `cronlog sql QUERY` runs a query without it")


def run_interactive(settings: Settings) -> int:
    binary = _client_binary()
    client = connect(settings)
    try:
        readonly = bool(session_settings(client))  # also: the credentials work
    except (ClickHouseError, OSError, EOFError) as exc:
        raise SqlCommandError(f"ClickHouse at {settings.clickhouse_host}:"
                              f"{settings.clickhouse_port} as {settings.clickhouse_user}: "
                              f"{server_message(exc)}") from None
    finally:
        client.disconnect()
    with tempfile.TemporaryDirectory(prefix="cronlog-sql-") as folder:  # mode 0700
        config = Path(folder) / "client.xml"
        config.touch(mode=0o600)
        config.write_text(client_config(settings))
        # Ctrl-C belongs to the client (it cancels a query); this process just waits.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return subprocess.call(client_argv(binary, settings, config, readonly))
        finally:
            signal.signal(signal.SIGINT, previous)


def run_sql(settings: Settings, query: str | None, fmt: str | None) -> int:
    chosen = fmt or ("table" if sys.stdout.isatty() else "tsv")
    try:
        if query is None:
            return run_interactive(settings)
        run_query(settings, query, chosen, sys.stdout)
    except SqlCommandError as exc:
        print(f"cronlog sql: error: {exc}", file=sys.stderr)
        return 1
    return 0
