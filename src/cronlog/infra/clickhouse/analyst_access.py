"""Per-tenant analyst users on ClickHouse, kept by `cronlog provision` from CRONLOG_ANALYSTS:
each tenant's rows copied into a database of its own as they are written
(tenant_copies.py), and each analyst a read-only user that may read its tenant's database
only (analyst_users.py). The same on Debian's ClickHouse 18.16, which has no row-level
security, and on current servers (docs/analytics.md).

Everything that can refuse is checked before anything is changed: the names, the users
folder, or a server with neither a folder configured nor SQL access control.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from clickhouse_driver import Client
from clickhouse_driver.errors import Error as ClickHouseError

from cronlog.infra.clickhouse.analyst_users import (
    ACCESS_CONTROL,
    SERVER_VERSION,
    SQL_ANALYSTS,
    SQL_USERS,
    redacted,
    sql_statements,
    write_users_file,
)
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, HistoryStoreError
from cronlog.infra.clickhouse.tenant_copies import (
    TENANT_DATABASE_INFIX,
    TenantCopyError,
    read_copies,
    sync_tenants,
    tenant_database,
)
from cronlog.infra.config import Analyst, Settings

# Users a file entry would merge into rather than make (18.16 merges same-named entries).
RESERVED_USERS = frozenset({"default"})
# How long provision waits for the server to load a users file (18.16 took about 2 s).
USERS_LOADED_WITHIN_S = 30.0
POLL_EVERY_S = 0.25


class AnalystAccessError(RuntimeError):
    """Analyst users cannot be set up as configured; nothing was changed, unless the
    message says what was."""


class AnalystAccessUnsupported(AnalystAccessError):
    """The server keeps its users in files and no users folder is configured."""


@dataclass(frozen=True)
class AccessPlan:
    """How the users are kept: a users file in `users_dir`, or SQL (`existing`: the users
    an earlier provision made there)."""

    users_dir: Path | None
    existing: tuple[str, ...] = ()


def check(settings: Settings, history: ClickHouseRunHistory,
          analysts: Sequence[Analyst]) -> AccessPlan:
    """Refuses, with nothing changed, what provision cannot do as configured."""
    for analyst in analysts:
        if analyst.user == settings.clickhouse_user:
            raise AnalystAccessError(f"analyst user {analyst.user!r} is cronlog's own "
                                     "ClickHouse user (CRONLOG_CLICKHOUSE_USER)")
        if analyst.user in RESERVED_USERS:
            raise AnalystAccessError(f"analyst user {analyst.user!r} is the server's own")
        try:
            tenant_database(history.database, analyst.tenant)
        except TenantCopyError as exc:
            raise AnalystAccessError(str(exc)) from None
    if settings.clickhouse_users_dir:
        folder = Path(settings.clickhouse_users_dir)
        if not folder.is_dir():
            raise AnalystAccessError(f"CRONLOG_CLICKHOUSE_USERS_DIR {folder} is not a folder")
        if not _writable(folder):
            raise AnalystAccessError(f"CRONLOG_CLICKHOUSE_USERS_DIR {folder} is not writable")
        return AccessPlan(folder)
    if history.execute(ACCESS_CONTROL)[0][0] == 0:
        version = history.execute(SERVER_VERSION)[0][0]
        raise AnalystAccessUnsupported(
            f"ClickHouse {version} keeps its users in configuration files (it has no SQL "
            "access control): set CRONLOG_CLICKHOUSE_USERS_DIR to the server's users.d "
            "folder (for example /etc/clickhouse-server/users.d), which provision writes "
            "the analysts' users file into. Nothing was changed.")
    prefix = history.database + TENANT_DATABASE_INFIX
    ours = {str(u) for (u,) in history.execute(SQL_ANALYSTS, {"prefix": prefix})}
    others = {str(u) for (u,) in history.execute(SQL_USERS)} - ours
    taken = sorted(a.user for a in analysts if a.user in others)
    if taken:
        raise AnalystAccessError(f"analyst user {', '.join(taken)} exists on the server and "
                                 "was not made by cronlog provision; it is left as it is. "
                                 "Nothing was changed.")
    return AccessPlan(None, tuple(sorted(ours)))


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def provision_analysts(settings: Settings, history: ClickHouseRunHistory,
                       analysts: Sequence[Analyst], plan: AccessPlan) -> list[str]:
    """Makes the server's analysts exactly `analysts`: their tenants' copies up to date,
    their users written, the copies and users no longer listed removed; returns when the
    server lets each analyst in (and no removed one). Returns what it did, a line each (no
    password, no hash)."""
    tenants = sorted({a.tenant for a in analysts})
    try:
        copied = read_copies(history)
        done = sync_tenants(history, tenants)
        if plan.users_dir is not None:
            _, before = write_users_file(plan.users_dir, history.database, analysts,
                                         settings.analyst_networks)
            gone = sorted(set(before) - {a.user for a in analysts})
        else:
            gone = sorted(set(plan.existing) - {a.user for a in analysts})
            for statement in sql_statements(history.database, analysts,
                                            settings.analyst_networks, plan.existing):
                try:
                    history.execute(statement)
                except HistoryStoreError as exc:
                    raise AnalystAccessError(
                        f"ClickHouse refused {redacted(statement)}: {exc}") from None
    except (HistoryStoreError, OSError) as exc:
        raise AnalystAccessError(f"provisioning analysts failed part way ({exc}); run "
                                 "cronlog provision again to finish") from None
    for analyst in analysts:
        _wait(partial(_signs_in, settings, analyst), f"analyst {analyst.user} to be let in")
    report = []
    for analyst in analysts:
        tables = done.get(analyst.tenant, [])
        report.append(f"analyst {analyst.user}: tenant {analyst.tenant}, reads database "
                      f"{tenant_database(history.database, analyst.tenant)} "
                      f"({', '.join(copied.copied_tables())})"
                      + (f"; copied again: {', '.join(tables)}" if tables else ""))
    never = copied.never_copied()
    if never:
        report.append(f"never copied for analysts (no tenant column): {', '.join(never)}")
    report += [f"analyst {user}: removed" for user in gone]
    report += [f"tenant database {db}: dropped" for db in done.get("", [])]
    return report


def _signs_in(settings: Settings, analyst: Analyst) -> bool:
    tls = ({"secure": True, "verify": settings.clickhouse_verify,
            "ca_certs": settings.clickhouse_ca_file or None}
           if settings.clickhouse_secure else {})
    client = Client(host=settings.clickhouse_host, port=settings.clickhouse_port,
                    user=analyst.user, password=analyst.password,
                    database=tenant_database(settings.clickhouse_database, analyst.tenant),
                    connect_timeout=5, send_receive_timeout=10, **tls)
    try:
        client.execute("SELECT 1")
        return True
    except (ClickHouseError, OSError, EOFError):
        return False
    finally:
        client.disconnect()


def _wait(condition: Callable[[], bool], what: str) -> None:
    """Polls until `condition` holds, at most USERS_LOADED_WITHIN_S."""
    deadline = time.monotonic() + USERS_LOADED_WITHIN_S
    while not condition():
        if time.monotonic() > deadline:
            raise AnalystAccessError(
                f"waited {USERS_LOADED_WITHIN_S:.0f} s for {what}: is the users folder one "
                "the server reads (its users.d), and are the networks right?")
        time.sleep(POLL_EVERY_S)
