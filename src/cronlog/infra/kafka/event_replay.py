"""KafkaEventReplay: reads one partition of an event topic up to its last stable offset."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from cronlog.commands.ports import UNREADABLE, InboundMessage, LogUnavailable
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.messages import MessageDecoder, inbound_or_unreadable

log = logging.getLogger(__name__)

STALL_TIMEOUT = 15.0


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
            yield from self._read(consumer, topic, partition, from_offset, batch)
        except KafkaException as exc:
            raise LogUnavailable(f"reading {topic}[{partition}]: {exc}") from exc
        finally:
            consumer.close()

    def _read(self, consumer: Consumer, topic: str, partition: int, from_offset: int,
              batch: int) -> Iterator[list[InboundMessage]]:
        # With read_committed the high watermark is the last stable offset: everything
        # before it is decided, so the replay neither waits for nor sees open transactions.
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=10, cached=False)
        start = max(from_offset, low)
        if start >= high:
            return
        consumer.assign([TopicPartition(topic, partition, start)])
        last_progress = time.monotonic()
        while True:
            # Short waits: a partition's last offset is often a transaction marker, which is
            # never delivered, so a long wait here was a whole timeout per topic and partition
            # (a takeover of 8 partitions took 16 s; 1 s waits, two topics each).
            messages = consumer.consume(num_messages=batch, timeout=0.05)
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT:
                raise LogUnavailable(f"reading {topic}[{partition}]: no progress for "
                                     f"{STALL_TIMEOUT:.0f}s")
            out: list[InboundMessage] = []
            done = False
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        done = True
                        continue
                    # A catch-up must be complete: stopping early could fire twice.
                    raise LogUnavailable(f"reading {topic}[{partition}]: {error}")
                if (m.offset() or 0) >= high:
                    done = True
                    break
                decoded = inbound_or_unreadable(m, self._decoder)
                if decoded is not None and decoded.name == UNREADABLE:
                    # Not written by an owner (theirs always decode): no state derives from
                    # it, and a takeover must not stop on it (DESIGN invariant 9).
                    log.error("skipping unreadable message %s[%d]@%d: %s", topic, partition,
                              decoded.offset, decoded.record.get("error"))
                elif decoded is not None:
                    out.append(decoded)
            if out:
                yield out
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if done or position >= high:
                return
