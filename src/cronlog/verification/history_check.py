"""The run history against the log (issue 38, `cronlog verify --projections`): each run's
rows in ClickHouse must be what the history projector makes of its events, folded here in
memory by the same projector (projections/history.py), unless ClickHouse holds a newer
version of the run (events written after the log was read).

Only runs whose creation (RunScheduled, RunMissed, RunSkipped) was read are compared (a run
created before the events read cannot be folded from them), the latest MOST_RUNS of them.
Compared per attempt: its status, the run's status, when it started and finished, and its
worker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from cronlog.domain.catalogue import RunEvent
from cronlog.projections.history import AttemptRow, HistoryProjector, RunEventRow
from cronlog.verification.findings import Check, Violation

Events = Sequence[tuple[str, Mapping[str, Any]]]

CREATES_RUN = frozenset({RunEvent.SCHEDULED, RunEvent.MISSED, RunEvent.SKIPPED})
COMPARED = ("attempt", "attempt_status", "run_status", "started_at_us", "finished_at_us",
            "worker")


class _Rows:
    """An in-memory history: what the projector would have written."""

    def __init__(self) -> None:
        self.runs: dict[str, list[AttemptRow]] = {}

    def write_attempt_rows(self, rows: Sequence[AttemptRow]) -> None:
        for row in rows:
            kept = [r for r in self.runs.get(row.run_id, []) if r.attempt != row.attempt]
            self.runs[row.run_id] = sorted([*kept, row], key=lambda r: r.attempt)

    def write_run_events(self, rows: Sequence[RunEventRow]) -> None:
        pass

    def latest_attempt_rows(self, run_ids: Sequence[str]) -> dict[str, list[AttemptRow]]:
        return {run_id: self.runs[run_id] for run_id in run_ids if run_id in self.runs}


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The runs compared at most, the latest by fire time: their rows are held in memory.
MOST_RUNS = 100_000


def expected_history(run_events: Mapping[str, Events],
                     most_runs: int = MOST_RUNS) -> dict[str, list[AttemptRow]]:
    """Each run's rows as the projector makes them from the events read, by run id: of the
    latest most_runs runs created in them."""
    creations = sorted((record["scheduled_at"], str(record["run_id"]))
                       for events in run_events.values()
                       for name, record in events if name in CREATES_RUN)
    created = {run_id for _, run_id in creations[-most_runs:]} if most_runs else set()
    rows = _Rows()
    projector = HistoryProjector(rows)
    for events in run_events.values():
        folded = [(name, record) for name, record in events
                  if str(record["run_id"]) in created]
        if folded:
            projector.apply_batch(folded)
    return rows.runs


def _attempts(rows: Sequence[AttemptRow]) -> list[tuple[Any, ...]]:
    return [tuple(getattr(r, name) for name in COMPARED) for r in rows]


def compare_history(expected: Mapping[str, list[AttemptRow]],
                    live: Mapping[str, list[AttemptRow]]) -> list[Violation]:
    """`live`: the history's latest rows of the same runs."""
    found: list[Violation] = []
    for run_id, rows in sorted(expected.items()):
        first = rows[0]
        fire_time = EPOCH + timedelta(microseconds=first.scheduled_at_us)
        held = live.get(run_id)
        if not held:
            found.append(Violation(Check.PROJECTION_DIFFERS, first.job_id, first.tenant,
                                   "the run history has no row of the run",
                                   fire_time=fire_time, run_id=run_id))
            continue
        if max(r.version for r in held) > max(r.version for r in rows):
            continue  # newer than what was read: events written since
        if _attempts(held) != _attempts(rows):
            found.append(Violation(
                Check.PROJECTION_DIFFERS, first.job_id, first.tenant,
                f"the run history's rows differ from the run's events: it holds "
                f"{_described(held)} where the log gives {_described(rows)}",
                fire_time=fire_time, run_id=run_id))
    return found


def _described(rows: Sequence[AttemptRow]) -> str:
    return "; ".join(f"attempt {r.attempt} {r.attempt_status} (run {r.run_status})"
                     for r in rows)
