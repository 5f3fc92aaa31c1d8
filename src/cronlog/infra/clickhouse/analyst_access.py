"""Per-tenant analyst users on ClickHouse: read-only (readonly=1, so they can change no
setting, create nothing and call no table function), granted SELECT on the history tables
that have a tenant column and nothing else, each such table filtered to their tenant's rows
by a row policy. `cronlog provision` plans the statements (plan_statements, pure) from what
the server holds and applies them as the service user.

Row-level security needs ClickHouse's SQL-driven access control (row policies, 20.4 on).
Debian's 18.16 has neither row policies nor users.xml row filters (its users.xml knows only
password, networks, profile, quota and allow_databases), so a per-tenant user there would
read every tenant's rows: provision refuses instead (docs/analytics.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, HistoryStoreError
from cronlog.infra.config import Analyst

# Capabilities: a server with SQL access control has system.row_policies.
ROW_POLICIES_TABLE = ("SELECT count() FROM system.tables "
                      "WHERE database = 'system' AND name = 'row_policies'")
SERVER_VERSION = "SELECT version()"
# Every table of the history and whether it has the tenant column.
HISTORY_TABLES = ("SELECT table, max(name = 'tenant') FROM system.columns "
                  "WHERE database = %(db)s GROUP BY table ORDER BY table")
# The analysts an earlier provision made: each has its tenant policy on the history tables.
TENANT_POLICY_PREFIX = "cronlog_tenant_"
PROVISIONED_POLICIES = ("SELECT short_name, table FROM system.row_policies "
                        "WHERE database = %(db)s AND startsWith(short_name, %(prefix)s)")
# Rows are shown to a user through a permissive policy, and the restrictive tenant policy
# narrows them; this one names the service user and the analysts, so it never widens what
# another user of the server sees (a table with policies shows none to a user without one,
# unless the server's users_without_row_policies_can_read_rows says otherwise).
READ_POLICY = "cronlog_read"

CREATE_USER = ("CREATE USER IF NOT EXISTS {user} IDENTIFIED WITH sha256_hash BY '{hash}' "
               "SETTINGS readonly = 1")
# The same again for a user that exists: its password and setting as configured now.
ALTER_USER = "ALTER USER {user} IDENTIFIED WITH sha256_hash BY '{hash}' SETTINGS readonly = 1"
# Grants are rebuilt from nothing, so a table that lost its tenant column loses its grant.
REVOKE_ALL = "REVOKE ALL ON *.* FROM {user}"
GRANT_SELECT = "GRANT SELECT ON {db}.{table} TO {user}"
TENANT_POLICY = ("CREATE ROW POLICY OR REPLACE {policy} ON {db}.{table} AS RESTRICTIVE "
                 "FOR SELECT USING tenant = {tenant} TO {user}")
READ_POLICY_STATEMENT = ("CREATE ROW POLICY OR REPLACE {policy} ON {db}.{table} AS PERMISSIVE "
                         "FOR SELECT USING 1 TO {users}")
DROP_POLICY = "DROP ROW POLICY IF EXISTS {policy} ON {db}.{table}"
DROP_USER = "DROP USER IF EXISTS {user}"


class AnalystAccessError(RuntimeError):
    """Analyst users cannot be set up as configured; nothing was changed."""


class AnalystAccessUnsupported(AnalystAccessError):
    """The server has no row-level security, so no user of it can be kept to one tenant."""


@dataclass(frozen=True)
class ServerView:
    """What provision reads from the server before planning."""

    database: str
    service_user: str
    # Every table of the history database: name -> whether it has a tenant column.
    tables: dict[str, bool]
    # (policy short name, table) of the tenant policies an earlier provision made.
    provisioned: frozenset[tuple[str, str]]


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _hash(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def tenant_tables(view: ServerView) -> list[str]:
    return sorted(table for table, has_tenant in view.tables.items() if has_tenant)


def plan_statements(view: ServerView, analysts: Sequence[Analyst]) -> list[str]:
    """The statements that make the server's analysts exactly `analysts`: each one created
    or updated, SELECT on every tenant table with its tenant's policy, the analysts of an
    earlier provision that are no longer listed dropped with their policies."""
    for analyst in analysts:
        if analyst.user == view.service_user:
            raise AnalystAccessError(f"analyst user {analyst.user!r} is cronlog's own "
                                     "ClickHouse user (CRONLOG_CLICKHOUSE_USER)")
    db, tables = view.database, tenant_tables(view)
    statements: list[str] = []
    listed = {TENANT_POLICY_PREFIX + a.user for a in analysts}
    gone = sorted({policy for policy, _ in view.provisioned} - listed)
    for policy, table in sorted(view.provisioned):
        if policy in gone:
            statements.append(DROP_POLICY.format(policy=policy, db=db, table=table))
    statements += [DROP_USER.format(user=policy.removeprefix(TENANT_POLICY_PREFIX))
                   for policy in gone]
    for analyst in analysts:
        user, password_hash = analyst.user, _hash(analyst.password)
        statements += [CREATE_USER.format(user=user, hash=password_hash),
                       ALTER_USER.format(user=user, hash=password_hash),
                       REVOKE_ALL.format(user=user)]
        for table in tables:
            statements.append(GRANT_SELECT.format(db=db, table=table, user=user))
            statements.append(TENANT_POLICY.format(
                policy=TENANT_POLICY_PREFIX + user, db=db, table=table,
                tenant=_literal(analyst.tenant), user=user))
    readers = ", ".join([view.service_user, *(a.user for a in analysts)])
    for table in tables:
        statements.append(
            READ_POLICY_STATEMENT.format(policy=READ_POLICY, db=db, table=table, users=readers)
            if analysts else DROP_POLICY.format(policy=READ_POLICY, db=db, table=table))
    return statements


def redacted(statement: str) -> str:
    """A statement as an error may show it: without the password's hash."""
    head, sep, tail = statement.partition(" BY '")
    return head + (sep + "…'" + tail.partition("'")[2] if sep else "")


def read_server(history: ClickHouseRunHistory, service_user: str) -> ServerView:
    """What the server holds, or AnalystAccessUnsupported when it has no row policies."""
    if history.execute(ROW_POLICIES_TABLE)[0][0] == 0:
        version = history.execute(SERVER_VERSION)[0][0]
        raise AnalystAccessUnsupported(
            f"ClickHouse {version} has no row-level security (row policies came with "
            "ClickHouse 20.4; 18.16's users.xml has no row filters either), so a per-tenant "
            "analyst user would read every tenant's rows: CRONLOG_ANALYSTS needs a newer "
            "server. Nothing was changed.")
    tables = {str(t): bool(has) for t, has in history.execute(
        HISTORY_TABLES, {"db": history.database})}
    provisioned = frozenset((str(p), str(t)) for p, t in history.execute(
        PROVISIONED_POLICIES, {"db": history.database, "prefix": TENANT_POLICY_PREFIX}))
    return ServerView(history.database, service_user, tables, provisioned)


def provision_analysts(history: ClickHouseRunHistory, service_user: str,
                       analysts: Sequence[Analyst]) -> list[str]:
    """Applies the plan; returns what it did, a line each (no password, no hash)."""
    view = read_server(history, service_user)
    for statement in plan_statements(view, analysts):
        try:
            history.execute(statement)
        except HistoryStoreError as exc:
            raise AnalystAccessError(f"ClickHouse refused {redacted(statement)}: {exc}") from None
    tables = tenant_tables(view)
    hidden = sorted(set(view.tables) - set(tables))
    report = [f"analyst {a.user}: tenant {a.tenant}, SELECT on {', '.join(tables)}"
              for a in analysts]
    if hidden:
        report.append(f"analysts are not granted (no tenant column): {', '.join(hidden)}")
    gone = sorted({p for p, _ in view.provisioned} - {TENANT_POLICY_PREFIX + a.user
                                                      for a in analysts})
    report += [f"analyst {p.removeprefix(TENANT_POLICY_PREFIX)}: removed" for p in gone]
    return report
