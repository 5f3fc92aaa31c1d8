"""Drops whole day partitions of the history tables once they are older than retention."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory

HISTORY_TABLES = ("runs", "run_keys", "run_events", "missed_fire_times", "dependency_events",
                  "job_events")

# Every one of them is partitioned by toYYYYMMDD(...): a partition's value is its day.
ACTIVE_PARTITIONS = """
SELECT DISTINCT table, partition
FROM system.parts
WHERE database = %(db)s AND active AND table IN %(tables)s
"""


class HistoryRetention:
    def __init__(self, history: ClickHouseRunHistory, keep: timedelta = timedelta(days=90)) -> None:
        self._history = history
        self._keep = keep

    def run(self, now: datetime) -> list[tuple[str, int]]:
        """Drops every day partition before now - keep; returns what it dropped."""
        cutoff = int((now - self._keep).strftime("%Y%m%d"))
        rows = self._history.execute(ACTIVE_PARTITIONS, {"db": self._history.database,
                                                         "tables": HISTORY_TABLES})
        dropped = []
        for table, partition in sorted(rows):
            day = int(str(partition).strip("'"))
            if day < cutoff:
                self._history.execute(
                    f"ALTER TABLE {self._history.database}.{table} DROP PARTITION {day}")
                dropped.append((table, day))
        return dropped
