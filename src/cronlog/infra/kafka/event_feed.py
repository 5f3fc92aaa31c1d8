"""KafkaEventFeed: a consumer group over event topics whose offsets follow the projection."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.fetch_watchdog import StalledFetchWatchdog
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.infra.kafka.messages import MessageDecoder, inbound_or_unreadable
from cronlog.infra.observability.kafka_stats import STATISTICS_INTERVAL_MS
from cronlog.ports import InboundMessage, LogUnavailable


class KafkaEventFeed:
    def __init__(self, settings: Settings, group: str, topics: Sequence[str],
                 decoder: MessageDecoder,
                 on_statistics: Callable[[str], None] | None = None) -> None:
        """on_statistics: given librdkafka's statistics (JSON) every few seconds."""
        self._decoder = decoder
        observed: dict[str, object] = {} if on_statistics is None else {
            "statistics.interval.ms": STATISTICS_INTERVAL_MS, "stats_cb": on_statistics}
        self._consumer = Consumer(consumer_config(
            settings, f"{settings.group_prefix}-{group}",
            **{"partition.assignment.strategy": "cooperative-sticky", **observed}))
        # None until the group has answered, and again while rejoining after a lost session.
        self._assignment: frozenset[tuple[str, int]] | None = None
        self._consumer.subscribe(list(topics), on_assign=self._assigned,
                                 on_revoke=self._revoked, on_lost=self._lost)
        self._watchdog = StalledFetchWatchdog(
            self._consumer, bounds=LogBounds(settings))

    @property
    def assignment(self) -> frozenset[tuple[str, int]] | None:
        return self._assignment

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Cooperative assignment: these partitions are added to those already held.
        self._assignment = (self._assignment or frozenset()) | {
            (tp.topic, tp.partition) for tp in partitions}

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._assignment is not None:
            self._assignment = self._assignment - {(tp.topic, tp.partition) for tp in partitions}

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._revoked(consumer, partitions)
        self._assignment = None

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        self._watchdog.check()
        messages = self._consumer.consume(num_messages=max_messages, timeout=timeout)
        # An undecodable event comes back as UNREADABLE, for the projection to set aside.
        decoded = (inbound_or_unreadable(m, self._decoder) for m in messages)
        return [m for m in decoded if m is not None]

    def commit(self, applied: Sequence[InboundMessage]) -> None:
        """Commits past the given messages, after the projection has stored them."""
        next_offsets: dict[tuple[str, int], int] = {}
        for m in applied:
            key = (m.topic, m.partition)
            next_offsets[key] = max(next_offsets.get(key, 0), m.offset + 1)
        if next_offsets:
            try:
                self._consumer.commit(offsets=[TopicPartition(t, p, o)
                                               for (t, p), o in next_offsets.items()],
                                      asynchronous=False)
            except KafkaException as exc:
                raise LogUnavailable(f"offsets not committed: {exc}") from exc

    def close(self) -> None:
        self._consumer.close()
