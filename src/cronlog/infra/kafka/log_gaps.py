"""Whether the log still holds what a replay or an audit needs.

Kafka deletes a partition's oldest records (retention, or delete_records); a reader
started below the low watermark silently begins at it. Replay and audit must not: a
projection rebuilt from a log missing its beginning is wrong without a sign of it. Job events
are needed from offset 0 (they are kept forever); run events from the start of the history
horizon (they are kept at least that long, docs/operations.md, "Topics"), so a run events
partition trimmed only before the horizon is whole enough.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import Consumer, KafkaError, TopicPartition

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.log_bounds import LogBounds, TopicPartitionKey

FIRST_MESSAGE_TIMEOUT = 15.0


@dataclass(frozen=True)
class Need:
    """Where a reader must start: an offset, unless the partition's first message still held
    is from `since` or before (everything before it is past the horizon)."""
    offset: int = 0
    since: datetime | None = None


@dataclass(frozen=True)
class LogGap:
    topic: str
    partition: int
    needed_from: int
    first_offset_held: int
    # None: the partition holds no message at all any more.
    first_held_at: datetime | None
    needed_since: datetime | None = None

    def describe(self) -> str:
        held = (f"its earliest message still held is offset {self.first_offset_held}, "
                f"written {self.first_held_at.isoformat()}" if self.first_held_at is not None
                else f"it holds no message (next offset {self.first_offset_held})")
        missing = (f"offsets {self.needed_from} to {self.first_offset_held - 1} are no longer "
                   "in the log")
        within = ("" if self.needed_since is None else
                  f", within the history horizon (from {self.needed_since.isoformat()})")
        return f"{self.topic} partition {self.partition}: {missing}{within}; {held}"


class LogGapError(RuntimeError):
    """The log no longer holds offsets a replay or an audit needs."""

    def __init__(self, gaps: list[LogGap]) -> None:
        self.gaps = gaps
        super().__init__("the log is missing events: " + "; ".join(g.describe() for g in gaps))


def find_gap(key: TopicPartitionKey, need: Need, low: int,
             first_held_at: datetime | None) -> LogGap | None:
    if low <= need.offset:
        return None
    if need.since is not None and first_held_at is not None and first_held_at <= need.since:
        return None
    return LogGap(key[0], key[1], need.offset, low, first_held_at, need.since)


def horizon_start(now: datetime, retention: timedelta, lead: timedelta) -> datetime:
    """The oldest instant whose run events a history rebuild needs: the start of the oldest
    day history keeps (retention drops whole days), less `lead`, as a run's first event is
    written up to a lookahead before its time."""
    day = (now - retention).astimezone(UTC).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC) - lead


@dataclass(frozen=True)
class Coverage:
    """Where each partition may be read from, or the gaps that forbid it."""
    starts: dict[TopicPartitionKey, int]
    gaps: list[LogGap]

    def raise_gaps(self) -> None:
        if self.gaps:
            raise LogGapError(self.gaps)


class LogGapCheck:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._bounds = LogBounds(settings)

    def coverage(self, needs: Mapping[TopicPartitionKey, Need]) -> Coverage:
        bounds = self._bounds.of(list(needs))
        trimmed = {key: bounds[key] for key, need in needs.items() if bounds[key][0] > need.offset}
        first_at = self._first_held_at(trimmed) if trimmed else {}
        gaps: list[LogGap] = []
        starts: dict[TopicPartitionKey, int] = {}
        for key, need in needs.items():
            gap = find_gap(key, need, bounds[key][0], first_at.get(key))
            if gap is not None:
                gaps.append(gap)
            starts[key] = max(need.offset, bounds[key][0])
        return Coverage(starts, sorted(gaps, key=lambda g: (g.topic, g.partition)))

    def _first_held_at(self, bounds: Mapping[TopicPartitionKey, tuple[int, int]]
                       ) -> dict[TopicPartitionKey, datetime]:
        """The write time of each partition's first message still held (none for an empty
        one, or one holding only aborted transactions)."""
        waiting = {key for key, (low, high) in bounds.items() if low < high}
        if not waiting:
            return {}
        consumer = Consumer(consumer_config(self._settings, None,
                                            **{"enable.partition.eof": True}))
        found: dict[TopicPartitionKey, datetime] = {}
        try:
            consumer.assign([TopicPartition(t, p, bounds[(t, p)][0]) for t, p in waiting])
            deadline = time.monotonic() + FIRST_MESSAGE_TIMEOUT
            while waiting and time.monotonic() < deadline:
                for m in consumer.consume(num_messages=100, timeout=0.2):
                    key = (str(m.topic()), int(m.partition() or 0))
                    if key not in waiting:
                        continue
                    error = m.error()
                    if error is not None and error.code() != KafkaError._PARTITION_EOF:
                        continue
                    waiting.discard(key)
                    if error is None:
                        _, millis = m.timestamp()
                        found[key] = datetime.fromtimestamp(millis / 1000, UTC)
        finally:
            consumer.close()
        return found
