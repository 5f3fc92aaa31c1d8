"""Drops whole day partitions of the history tables once they are older than retention, in
the history database and in every tenant's copy of it (tenant_copies.py), so an analyst
never reads a day the history no longer has."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.clickhouse.tenant_copies import TENANT_DATABASE_INFIX, quoted, tenant_of

HISTORY_TABLES = ("runs", "run_keys", "run_events", "missed_fire_times", "dependency_events",
                  "job_events", "alert_deliveries")

# Every one of them is partitioned by toYYYYMMDD(...): a partition's value is its day. The
# tenant copies are made AS their history table, so they are partitioned the same way.
ACTIVE_PARTITIONS = """
SELECT DISTINCT database, table, partition
FROM system.parts
WHERE (database = %(db)s OR startsWith(database, %(tenant_prefix)s))
  AND active AND table IN %(tables)s
"""
DROP_PARTITION = "ALTER TABLE {db}.{table} DROP PARTITION {day}"


class HistoryRetention:
    def __init__(self, history: ClickHouseRunHistory, keep: timedelta = timedelta(days=90)) -> None:
        self._history = history
        self._keep = keep

    def run(self, now: datetime) -> list[tuple[str, int]]:
        """Drops every day partition before now - keep; returns what it dropped, a table
        of a tenant copy as `<tenant database>.<table>`."""
        db = self._history.database
        cutoff = int((now - self._keep).strftime("%Y%m%d"))
        rows = self._history.execute(ACTIVE_PARTITIONS, {
            "db": db, "tenant_prefix": db + TENANT_DATABASE_INFIX, "tables": HISTORY_TABLES})
        dropped = []
        # The history's own partitions first: a copy's day is never kept longer than its
        # source's, and a failure part way leaves copies at most a day behind in dropping.
        for database, table, partition in sorted(rows, key=lambda r: (r[0] != db, r)):
            if database != db and tenant_of(db, database) is None:
                continue
            day = int(str(partition).strip("'"))
            if day < cutoff:
                self._history.execute(DROP_PARTITION.format(
                    db=quoted(database), table=quoted(table), day=day))
                dropped.append((table if database == db else f"{database}.{table}", day))
        return dropped
