"""Connections and schema set-up for cronlog's Postgres projection."""

from __future__ import annotations

import importlib.resources
from typing import Any

import psycopg

from cronlog.infra.postgres.job_listing import fill_missing
from cronlog.ports import StoreUnavailable


class StateStoreError(StoreUnavailable):
    """Postgres refused or failed a projection read or write."""


def connect(dsn: str, autocommit: bool = False) -> psycopg.Connection[tuple[Any, ...]]:
    try:
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=10)
    except psycopg.Error as exc:
        raise StateStoreError(f"cannot connect to Postgres: {exc}") from exc


class LayoutMismatch(StateStoreError):
    """The database holds the epochs of another number of logical partitions."""


# Whether the schema was set up at all (a statement naming a missing table fails to plan).
HAS_PARTITION_OWNERS = "SELECT to_regclass('partition_owners') IS NOT NULL"

# How many logical partitions the database has rows for, and whether any was ever used: an
# epoch taken, an event applied, a job stored.
PARTITION_ROWS = """
SELECT (SELECT count(*) FROM partition_owners),
       EXISTS (SELECT 1 FROM partition_owners
               WHERE epoch <> 0 OR job_events_offset <> 0 OR run_events_offset <> 0)
       OR EXISTS (SELECT 1 FROM jobs)
"""

# A database nothing has used yet takes the configured count (tests and benchmarks set up a
# schema before they choose their layout).
DROP_UNUSED_PARTITIONS = "DELETE FROM partition_owners WHERE partition >= %s"


def _check_layout(conn: psycopg.Connection[tuple[Any, ...]], partitions: int) -> bool:
    """Whether the database's rows are for another count but unused (free to re-lay);
    raises LayoutMismatch when they are for another count and used."""
    exists = conn.execute(HAS_PARTITION_OWNERS).fetchone()
    if not exists or not exists[0]:
        return False
    row = conn.execute(PARTITION_ROWS).fetchone()
    found, used = (int(row[0]), bool(row[1])) if row else (0, False)
    if not found or found == partitions:
        return False
    if used:
        # Every job row carries its logical partition, hashed with the count it was created
        # under: another count would put jobs where no owner looks for them.
        raise LayoutMismatch(
            f"Postgres holds epochs for {found} logical partitions, CRONLOG_PARTITIONS is "
            f"{partitions}: the logical partition count cannot change in place. Keep "
            f"CRONLOG_PARTITIONS={found}, or migrate: provision an empty database (and new "
            "topics) with the new layout and replay the log into it (docs/partitions.md, "
            "\"Migrating\")")
    return True


def check_layout(dsn: str, partitions: int) -> None:
    """Refuses a database already used with another logical partition count, writing
    nothing."""
    with connect(dsn, autocommit=True) as conn:
        _check_layout(conn, partitions)


def ensure_schema(dsn: str, partitions: int) -> None:
    ddl = importlib.resources.files("cronlog.infra.postgres").joinpath("schema.sql").read_text()
    with connect(dsn, autocommit=True) as conn:
        # Several processes may start at once; the advisory lock keeps their DDL apart.
        conn.execute("SELECT pg_advisory_lock(7253001)")
        try:
            relay = _check_layout(conn, partitions)
            conn.execute(ddl.encode())
            if relay:
                conn.execute(DROP_UNUSED_PARTITIONS, (partitions,))
            conn.execute(
                "INSERT INTO partition_owners (partition) SELECT generate_series(0, %s - 1) "
                "ON CONFLICT (partition) DO NOTHING", (partitions,))
            fill_missing(conn)
        finally:
            conn.execute("SELECT pg_advisory_unlock(7253001)")
