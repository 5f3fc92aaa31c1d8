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


def ensure_schema(dsn: str, partitions: int) -> None:
    ddl = importlib.resources.files("cronlog.infra.postgres").joinpath("schema.sql").read_text()
    with connect(dsn, autocommit=True) as conn:
        # Several processes may start at once; the advisory lock keeps their DDL apart.
        conn.execute("SELECT pg_advisory_lock(7253001)")
        try:
            conn.execute(ddl.encode())
            conn.execute(
                "INSERT INTO partition_owners (partition) SELECT generate_series(0, %s - 1) "
                "ON CONFLICT (partition) DO NOTHING", (partitions,))
            fill_missing(conn)
        finally:
            conn.execute("SELECT pg_advisory_unlock(7253001)")
