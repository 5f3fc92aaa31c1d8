"""KafkaDispatchSource: a queue's dispatch topic, read by the queue's worker group."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.fetch_watchdog import StalledFetchWatchdog
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.infra.kafka.messages import MessageDecoder, inbound
from cronlog.infra.observability.kafka_stats import STATISTICS_INTERVAL_MS
from cronlog.ports import InboundMessage

log = logging.getLogger(__name__)

SLOW_COMMIT = 1.0


class KafkaDispatchSource:
    def __init__(self, settings: Settings, queue: str, decoder: MessageDecoder,
                 on_statistics: Callable[[str], None] | None = None) -> None:
        """on_statistics: given librdkafka's statistics (JSON) every few seconds."""
        self._topic = settings.dispatch_topic(queue)
        self._decoder = decoder
        observed: dict[str, object] = {} if on_statistics is None else {
            "statistics.interval.ms": STATISTICS_INTERVAL_MS, "stats_cb": on_statistics}
        self._consumer = Consumer(consumer_config(
            settings, f"{settings.group_prefix}-workers-{queue}",
            **{"partition.assignment.strategy": "cooperative-sticky",
               "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **observed},
        ))
        self._listeners: list[Callable[[list[int]], None]] = []
        # None until the group has answered, and again while rejoining after a lost session.
        self._assignment: frozenset[int] | None = None
        self._consumer.subscribe([self._topic], on_assign=self._assigned,
                                 on_revoke=self._revoked, on_lost=self._lost)
        self._watchdog = StalledFetchWatchdog(
            self._consumer, bounds=LogBounds(settings))

    def _assigned(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Cooperative assignment: these partitions are added to those already held.
        self._assignment = (self._assignment or frozenset()) | {tp.partition for tp in partitions}

    @property
    def assignment(self) -> frozenset[int] | None:
        return self._assignment

    def _lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._revoked(consumer, partitions)
        self._assignment = None

    def _revoked(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = [tp.partition for tp in partitions]
        if self._assignment is not None:
            self._assignment = self._assignment - set(numbers)
        for listener in self._listeners:
            listener(numbers)

    def on_revoke(self, listener: Callable[[list[int]], None]) -> None:
        self._listeners.append(listener)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        self._watchdog.check()
        messages = self._consumer.consume(num_messages=max_messages, timeout=timeout)
        decoded = (inbound(m, self._decoder) for m in messages)
        return [m for m in decoded if m is not None]

    def commit(self, next_offsets: Mapping[int, int]) -> None:
        began = time.monotonic()
        try:
            self._consumer.commit(
                offsets=[TopicPartition(self._topic, p, o) for p, o in next_offsets.items()],
                asynchronous=False,
            )
        except KafkaException as exc:
            # Not fatal: an uncommitted dispatch is delivered again (at least once).
            log.warning("dispatch offsets not committed: %s", exc)
        took = time.monotonic() - began
        if took > SLOW_COMMIT:
            # The worker's loop starts nothing meanwhile: say which wait it was.
            log.warning("committing dispatch offsets took %.1fs", took)

    def close(self) -> None:
        self._consumer.close()
