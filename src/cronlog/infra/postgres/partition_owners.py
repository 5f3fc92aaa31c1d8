"""PostgresPartitionOwners: the owner records the api reads to know whether owners caught up."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from cronlog.commands.api.ports import OwnerRecord
from cronlog.infra.postgres.connection import StateStoreError, connect

SELECT_OWNER_RECORDS = "SELECT partition, owner, caught_up_member FROM partition_owners"


class PostgresPartitionOwners:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def owner_records(self) -> Mapping[int, OwnerRecord]:
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = connect(self._dsn, autocommit=True)
            rows = self._conn.execute(SELECT_OWNER_RECORDS).fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"Postgres: {exc}") from exc
        return {int(p): OwnerRecord(owner, member) for p, owner, member in rows}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
