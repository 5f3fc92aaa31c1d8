"""Topics' committed messages, read incrementally by the workloads that judge runs from
the log: failover (the run events) and the scale workload's burst (the workers' start
reports on the inbox)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_replay import KafkaEventReplay, TopicPartitionKey
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.ports import LogUnavailable
from cronlog_dev.bench.progress import say

# Offsets by topic and partition.
Offsets = dict[TopicPartitionKey, int]


class CommittedEvents:
    """Each follow() hands `feed` what the topics committed since the last one, in offset
    order per partition: from their start, or from `starts` (offsets by topic and
    partition, see ends())."""

    def __init__(self, settings: Settings, topics: Iterable[str], what: str,
                 starts: Offsets | None = None) -> None:
        self._replay = KafkaEventReplay(settings, AvroCodec())
        # The topics have the layout's K Kafka partitions.
        self._next = {(topic, p): 0 for topic in topics for p in range(settings.layout.kafka)}
        self._next.update(starts or {})
        self._what = what

    def follow(self, feed: Callable[[str, Mapping[str, Any]], None]) -> None:
        try:
            for topic, partition, batch in self._replay.read_many(dict(self._next), 5000):
                for message in batch:
                    feed(message.name, message.record)
                self._next[(topic, partition)] = batch[-1].offset + 1
        except LogUnavailable as exc:
            # Progress is kept per batch; the next call goes on from there.
            say(f"[cronlog] reading {self._what}: {exc}; trying again later")


def ends(settings: Settings, topic: str) -> Offsets:
    """Where each partition of the topic ends now (its last stable offset): a reader that
    starts there reads only what comes after. Raises KafkaException."""
    keys = [(topic, p) for p in range(settings.layout.kafka)]
    return {key: high for key, (_low, high) in LogBounds(settings).of(keys).items()}
