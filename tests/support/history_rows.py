"""The run history's rows in memory, kept as ClickHouse's ReplacingMergeTree keeps them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cronlog.projections.history import AttemptRow, RunEventRow


@dataclass
class Store:
    """Keeps, like ReplacingMergeTree, the highest version of each (run, attempt) row."""

    rows: dict[tuple[str, int], AttemptRow] = field(default_factory=dict)
    events: dict[tuple[str, int], RunEventRow] = field(default_factory=dict)

    def write_attempt_rows(self, rows: Sequence[AttemptRow]) -> None:
        for row in rows:
            key = (row.run_id, row.attempt)
            if key not in self.rows or self.rows[key].version <= row.version:
                self.rows[key] = row

    def write_run_events(self, rows: Sequence[RunEventRow]) -> None:
        for row in rows:
            self.events[(row.run_id, row.version)] = row

    def latest_attempt_rows(self, run_ids: Sequence[str]) -> dict[str, list[AttemptRow]]:
        return {r: [row for (rid, _), row in self.rows.items() if rid == r] for r in run_ids}
