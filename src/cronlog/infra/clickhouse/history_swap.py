"""Puts a rebuilt history in place of the live one: every history table at once, so
readers see the old history or the new one, never one half built."""

from __future__ import annotations

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory

# Every table the history projector writes (schema.sql, rejected_events.py).
SWAPPED_TABLES = ("runs", "run_keys", "run_events", "jobs", "missed_fire_times", "dependency_events",
                  "job_events", "rejected_events")

LIVE_TABLES = "SELECT name FROM system.tables WHERE database = %(db)s AND name IN %(tables)s"
CREATE_DATABASE = "CREATE DATABASE {db}"
DROP_DATABASE = "DROP DATABASE IF EXISTS {db}"
# One statement: ClickHouse 18.16 has no EXCHANGE TABLES, and one RENAME of many tables
# moves them all before the next query runs (current engines make it atomic).
RENAME = "RENAME TABLE {pairs}"


def swap_in(live: ClickHouseRunHistory, rebuilt: str, replaced: str) -> list[str]:
    """Moves the live history tables into the new database `replaced` and the tables of
    `rebuilt` in their place; drops the emptied `rebuilt`. Returns the tables replaced."""
    existing = {row[0] for row in live.execute(
        LIVE_TABLES, {"db": live.database, "tables": SWAPPED_TABLES})}
    live.execute(CREATE_DATABASE.format(db=replaced))
    moves: list[str] = []
    for table in SWAPPED_TABLES:
        # Each table's pair together: the live name is away for as short a time as can be.
        if table in existing:
            moves.append(f"{live.database}.{table} TO {replaced}.{table}")
        moves.append(f"{rebuilt}.{table} TO {live.database}.{table}")
    live.execute(RENAME.format(pairs=", ".join(moves)))
    live.execute(DROP_DATABASE.format(db=rebuilt))
    return sorted(existing)
