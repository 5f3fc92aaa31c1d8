"""KafkaEventReplay: reads one partition of an event topic up to its last stable offset."""

from __future__ import annotations

from collections.abc import Iterator

from confluent_kafka import Consumer, TopicPartition

from cronlog.commands.ports import InboundMessage
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.messages import MessageDecoder, inbound


class KafkaEventReplay:
    def __init__(self, settings: Settings, decoder: MessageDecoder) -> None:
        self._settings = settings
        self._decoder = decoder

    def read(self, topic: str, partition: int, from_offset: int,
             batch: int = 1000) -> Iterator[list[InboundMessage]]:
        """Yields batches of committed messages from from_offset up to the end as of now."""
        consumer = Consumer(consumer_config(self._settings, None,
                                            **{"enable.partition.eof": True}))
        try:
            # With read_committed the high watermark is the last stable offset: everything
            # before it is decided, so the replay neither waits for nor sees open transactions.
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                       timeout=30, cached=False)
            start = max(from_offset, low)
            if start >= high:
                return
            consumer.assign([TopicPartition(topic, partition, start)])
            while True:
                messages = consumer.consume(num_messages=batch, timeout=1.0)
                out: list[InboundMessage] = []
                done = False
                for m in messages:
                    if m.error() is None and (m.offset() or 0) >= high:
                        done = True
                        break
                    decoded = inbound(m, self._decoder)
                    if decoded is None:
                        done = True
                        continue
                    out.append(decoded)
                if out:
                    yield out
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                if done or position >= high:
                    return
        finally:
            consumer.close()
