"""KafkaDispatchSource: a queue's dispatch topic, read by the queue's worker group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from cronlog.commands.ports import InboundMessage
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.messages import MessageDecoder, inbound


class KafkaDispatchSource:
    def __init__(self, settings: Settings, queue: str, decoder: MessageDecoder,
                 on_revoke: Any = None) -> None:
        self._topic = settings.dispatch_topic(queue)
        self._decoder = decoder
        self._consumer = Consumer(consumer_config(
            settings, f"{settings.group_prefix}-workers-{queue}",
            **{"partition.assignment.strategy": "cooperative-sticky",
               "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000},
        ))
        self._consumer.subscribe([self._topic])

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        messages = self._consumer.consume(num_messages=max_messages, timeout=timeout)
        decoded = (inbound(m, self._decoder) for m in messages)
        return [m for m in decoded if m is not None]

    def commit(self, next_offsets: Mapping[int, int]) -> None:
        self._consumer.commit(
            offsets=[TopicPartition(self._topic, p, o) for p, o in next_offsets.items()],
            asynchronous=False,
        )

    def close(self) -> None:
        self._consumer.close()
