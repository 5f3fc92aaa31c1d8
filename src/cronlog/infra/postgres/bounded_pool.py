"""A small pool of Postgres connections whose every statement is bounded in time
(byte_pages.configure_reads), with psycopg's errors translated at the edge: what the read
adapters (calendars, channels) and the notifier's state share."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from cronlog.infra.postgres.byte_pages import configure_reads
from cronlog.infra.postgres.connection import StateStoreError


class BoundedPool:
    def __init__(self, dsn: str, max_size: int = 2) -> None:
        self.pool = ConnectionPool(dsn, min_size=1, max_size=max_size, open=True,
                                   configure=configure_reads)

    def close(self) -> None:
        self.pool.close()

    def rows(self, query: str, params: Any, what: str) -> list[tuple[Any, ...]]:
        """The statement's rows (none for a statement that returns none), in a transaction
        of its own; StateStoreError naming `what` when Postgres fails it."""
        try:
            with self.pool.connection() as conn:
                cursor = conn.execute(query, params)
                return cursor.fetchall() if cursor.description else []
        except psycopg.Error as exc:
            raise StateStoreError(f"{what}: {exc}") from exc
