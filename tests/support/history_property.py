"""What the history projector's property (tests/unit/projections/test_projector_property.py,
and its twin on a real ClickHouse) checks with: the loop on the in-memory fakes, which row
each event writes, how a stream is cut into batches, and the runs as a reader sees them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any
from uuid import UUID

from cronlog.ports import InboundMessage
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.history import AttemptRow, HistoryProjector, micros
from cronlog.projections.history_loop import HistoryProjectorLoop
from cronlog.projections.job_history import JobHistoryProjector
from cronlog.projections.job_timeline import job_event_row
from tests.support.clickhouse_history import ClickHouseLikeHistory
from tests.support.clock import FakeClock
from tests.support.history_loop import Feed, Rejected

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)


def history_loop(feed: Feed, store: ClickHouseLikeHistory, rejected: Rejected
                 ) -> HistoryProjectorLoop:
    projector = CombinedHistoryProjector(HistoryProjector(store), JobHistoryProjector(store))
    return HistoryProjectorLoop(feed, projector, FakeClock(NOW), rejected, retry_delay=0.0)


def uuid_text(value: Any) -> str:
    return str(UUID(str(value)))


def _uuid_or_blank(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    return uuid_text(value) if value else ""


def dependency_key(m: InboundMessage) -> tuple[Any, ...]:
    return (uuid_text(m.record["job_id"]), int(m.record["version"]), m.name, micros(m.record["at"]),
            _uuid_or_blank(m.record, "dependent_job_id"),
            _uuid_or_blank(m.record, "upstream_run_id"))


def event_row_key(record: Mapping[str, Any], name: str) -> tuple[Any, ...]:
    """What identifies the run_events row an event writes."""
    return (uuid_text(record["run_id"]), int(record["version"]), name, micros(record["at"]),
            int(record.get("attempt", 0) or 0))


def missed_key(record: Mapping[str, Any]) -> tuple[Any, ...]:
    return (uuid_text(record["job_id"]), micros(record["first"]), micros(record["last"]),
            int(record["count"]), int(record["version"]))


def no_timeline_row(message: InboundMessage) -> bool:
    try:
        job_event_row(message.name, message.record, "tenant")
    except Exception:
        return True
    return False


def split(messages: list[InboundMessage], cuts: list[int]) -> list[list[InboundMessage]]:
    points = sorted({c % (len(messages) + 1) for c in cuts} | {0, len(messages)})
    return [messages[a:b] for a, b in pairwise(points) if b > a]


def runs_as_read(store: ClickHouseLikeHistory) -> dict[tuple[str, int], AttemptRow]:
    """Each run's newest row per attempt, as GetRun shows it: the attempt-0 row (a run
    without attempts) only while the run has no attempt. How many rows a run left on the
    way depends on how its events were batched; what a reader sees does not."""
    newest: dict[tuple[str, int], AttemptRow] = {}
    for row in store.runs:
        key = (row.run_id, row.attempt)
        if key not in newest or newest[key].version <= row.version:
            newest[key] = row
    with_attempts = {run_id for run_id, attempt in newest if attempt > 0}
    return {k: r for k, r in newest.items() if k[1] > 0 or k[0] not in with_attempts}
