"""Each analyst tenant's copy of the history: a database of its own, `<db>_tenant_<tenant>`,
holding one table per history table that has a tenant column, with the same columns and
engine, fed by a materialized view in that database that passes on the tenant's rows of
every insert into the history table. An analyst user may read that database only
(analyst_users.py), so it sees its tenant's rows and nothing else: this works alike on
Debian's ClickHouse 18.16, which has no row-level security, and on current servers.

Verified on 18.16.1: `CREATE MATERIALIZED VIEW ... TO`, `CREATE TABLE ... AS <source>` (same
columns, engine, order and partitioning), backtick-quoted database names with '.' and '-',
a source column added later leaves a view with an explicit column list working, and rows
copied twice collapse under FINAL (every history table is a ReplacingMergeTree).

The feed runs inside every insert into the history table (the projector's included), so it
must not fail where the insert would not: it selects the columns it was made with by name
(a column added to the history later is not in it until provision rebuilds the copy), with
`WHERE tenant = '<tenant>'` and nothing else; its table exists whenever it does (made
before it, dropped after it). Cost: one more filtered insert per analyst tenant per insert.

A copy is (re)built whole, never patched: the feed and the table dropped, the table made as
the source, the feed made, then the source's rows of the tenant copied once. Rows written
between the feed and the copy arrive twice and collapse. A marker row in the history
database (`analyst_copies`) says the copy was completed for these columns, so a provision
interrupted half way rebuilds it next time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from cronlog.domain.spec import TENANT_PATTERN
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory

TENANT_DATABASE_INFIX = "_tenant_"
FEED_SUFFIX = "_feed"
# In the history database, which analysts cannot read.
MARKER_TABLE = "analyst_copies"

# Every column of every table of the history database, in table order. MATERIALIZED and
# ALIAS columns are not stored by an insert, so a copy computes its own.
SOURCE_COLUMNS = """
SELECT table, name, type, default_kind, default_expression
FROM system.columns
WHERE database = %(db)s
"""
TENANT_DATABASES = """
SELECT name FROM system.databases WHERE startsWith(name, %(prefix)s) ORDER BY name
"""
FEEDS = """
SELECT database, name FROM system.tables
WHERE startsWith(database, %(prefix)s) AND engine = 'MaterializedView'
"""
CREATE_MARKER = """
CREATE TABLE IF NOT EXISTS {db}.`analyst_copies`
(
    tenant   String,
    table    String,
    columns  String,
    at       DateTime DEFAULT now()
)
ENGINE = ReplacingMergeTree(at)
ORDER BY (tenant, table)
"""
MARKERS = "SELECT tenant, table, argMax(columns, at) FROM {db}.`analyst_copies` GROUP BY tenant, table"
ADD_MARKER = "INSERT INTO {db}.`analyst_copies` (tenant, table, columns) VALUES"

CREATE_DATABASE = "CREATE DATABASE IF NOT EXISTS {tdb}"
DROP_FEED = "DROP TABLE IF EXISTS {tdb}.{feed}"
DROP_COPY = "DROP TABLE IF EXISTS {tdb}.{table}"
CREATE_COPY = "CREATE TABLE {tdb}.{table} AS {db}.{table}"
CREATE_FEED = ("CREATE MATERIALIZED VIEW {tdb}.{feed} TO {tdb}.{table} AS "
               "SELECT {columns} FROM {db}.{table} WHERE tenant = {tenant}")
COPY_ONCE = ("INSERT INTO {tdb}.{table} ({columns}) "
             "SELECT {columns} FROM {db}.{table} WHERE tenant = {tenant}")
DROP_DATABASE = "DROP DATABASE IF EXISTS {tdb}"


class TenantCopyError(RuntimeError):
    """A tenant's copy of the history cannot be made as asked; nothing was changed."""


def quoted(identifier: str) -> str:
    """A ClickHouse identifier in backticks, whatever it holds."""
    return "`" + identifier.replace("\\", "\\\\").replace("`", "\\`") + "`"


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tenant_database(database: str, tenant: str) -> str:
    """The database of one tenant's copy: the history's name, `_tenant_`, the tenant."""
    if not TENANT_PATTERN.fullmatch(tenant):
        raise TenantCopyError(f"tenant {tenant!r} must match {TENANT_PATTERN.pattern}")
    return f"{database}{TENANT_DATABASE_INFIX}{tenant}"


def tenant_of(database: str, tenant_db: str) -> str | None:
    prefix = database + TENANT_DATABASE_INFIX
    tenant = tenant_db.removeprefix(prefix)
    return tenant if tenant_db.startswith(prefix) and TENANT_PATTERN.fullmatch(tenant) else None


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    default_kind: str
    default_expression: str

    @property
    def stored(self) -> bool:
        return self.default_kind not in ("MATERIALIZED", "ALIAS")


@dataclass(frozen=True)
class Copies:
    """What the server holds: the history's tables, the tenant databases and their feeds,
    and the completed copies."""

    database: str
    # Every table of the history database and its columns, in order.
    tables: dict[str, tuple[Column, ...]]
    tenant_databases: frozenset[str]
    # (tenant database, feed name)
    feeds: frozenset[tuple[str, str]]
    # (tenant, table) -> the columns digest the copy was completed with
    completed: dict[tuple[str, str], str]

    def copied_tables(self) -> list[str]:
        """The history tables with a tenant column: the only ones a tenant gets."""
        return sorted(t for t, columns in self.tables.items()
                      if t != MARKER_TABLE and any(c.name == "tenant" for c in columns))

    def never_copied(self) -> list[str]:
        return sorted(set(self.tables) - set(self.copied_tables()) - {MARKER_TABLE})


def digest(columns: Sequence[Column]) -> str:
    text = "\n".join(f"{c.name}\t{c.type}\t{c.default_kind}\t{c.default_expression}"
                     for c in columns)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def rebuild_statements(database: str, tenant: str, table: str,
                       columns: Sequence[Column]) -> list[str]:
    """Drops and makes again one tenant's copy of one table, feed first gone and last made,
    then copies the tenant's rows once."""
    tdb = quoted(tenant_database(database, tenant))
    names = ", ".join(quoted(c.name) for c in columns if c.stored)
    parts = {"db": quoted(database), "tdb": tdb, "table": quoted(table),
             "feed": quoted(table + FEED_SUFFIX), "columns": names, "tenant": literal(tenant)}
    return [CREATE_DATABASE.format(**parts), DROP_FEED.format(**parts),
            DROP_COPY.format(**parts), CREATE_COPY.format(**parts),
            CREATE_FEED.format(**parts), COPY_ONCE.format(**parts)]


def drop_statements(copies: Copies, tenant_db: str) -> list[str]:
    """Removes a tenant's copy: its feeds first, so no insert into the history ever runs a
    feed whose table is gone, then the database."""
    feeds = sorted(feed for db, feed in copies.feeds if db == tenant_db)
    return [*(DROP_FEED.format(tdb=quoted(tenant_db), feed=quoted(f)) for f in feeds),
            DROP_DATABASE.format(tdb=quoted(tenant_db))]


def stale(copies: Copies, tenant: str) -> list[str]:
    """The tables of `tenant` whose copy is missing, incomplete or made with other columns
    than the history table has now."""
    tdb = tenant_database(copies.database, tenant)
    return [table for table in copies.copied_tables()
            if (tdb, table + FEED_SUFFIX) not in copies.feeds
            or copies.completed.get((tenant, table)) != digest(copies.tables[table])]


def read_copies(history: ClickHouseRunHistory) -> Copies:
    db = history.database
    history.execute(CREATE_MARKER.format(db=quoted(db)))
    tables: dict[str, list[Column]] = {}
    for table, name, type_, kind, expression in history.execute(SOURCE_COLUMNS, {"db": db}):
        tables.setdefault(str(table), []).append(
            Column(str(name), str(type_), str(kind), str(expression)))
    prefix = db + TENANT_DATABASE_INFIX
    databases = frozenset(str(name) for (name,) in history.execute(
        TENANT_DATABASES, {"prefix": prefix}) if tenant_of(db, str(name)) is not None)
    feeds = frozenset((str(d), str(n)) for d, n in history.execute(FEEDS, {"prefix": prefix}))
    completed = {(str(t), str(tb)): str(c) for t, tb, c in history.execute(
        MARKERS.format(db=quoted(db)))}
    return Copies(db, {t: tuple(c) for t, c in tables.items()}, databases, feeds, completed)


def rebuild(history: ClickHouseRunHistory, copies: Copies, tenant: str, table: str) -> None:
    columns = copies.tables[table]
    for statement in rebuild_statements(copies.database, tenant, table, columns):
        history.execute(statement)
    history.execute(ADD_MARKER.format(db=quoted(copies.database)),
                    [(tenant, table, digest(columns))])


def sync_tenants(history: ClickHouseRunHistory, tenants: Sequence[str],
                 everything: bool = False) -> dict[str, list[str]]:
    """Makes the tenant copies exactly `tenants`: each one's stale tables rebuilt (all of
    them when `everything`), the copies of tenants not listed dropped. Returns the tables
    rebuilt per tenant, and the dropped tenants under the key '' (by database name)."""
    copies = read_copies(history)
    done: dict[str, list[str]] = {}
    for tenant in sorted(set(tenants)):
        tables = copies.copied_tables() if everything else stale(copies, tenant)
        for table in tables:
            rebuild(history, copies, tenant, table)
        done[tenant] = tables
    wanted = {tenant_database(copies.database, t) for t in tenants}
    gone = sorted(copies.tenant_databases - wanted)
    for tenant_db in gone:
        for statement in drop_statements(copies, tenant_db):
            history.execute(statement)
    done[""] = gone
    return done


def tenants_on_server(history: ClickHouseRunHistory) -> list[str]:
    """The tenants whose copies the server holds (an earlier provision's)."""
    copies = read_copies(history)
    return sorted(t for t in (tenant_of(copies.database, d) for d in copies.tenant_databases)
                  if t is not None)


def resync_after_swap(history: ClickHouseRunHistory) -> list[str]:
    """After `cronlog replay --rebuild` put new history tables in place: every tenant's
    copy rebuilt from them (a feed may still read the replaced table: current servers'
    views follow a renamed table), so the copies hold what the new history holds."""
    tenants = tenants_on_server(history)
    sync_tenants(history, tenants, everything=True)
    return tenants

