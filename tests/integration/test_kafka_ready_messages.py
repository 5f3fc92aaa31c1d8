"""ready_messages against a real broker: what has arrived is handed out at once, however
far from a full batch, and a batch is never more than asked for."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.ready_messages import ready_messages
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration

# Far above anything the broker takes to hand over a message on loopback: a read that
# waited for its batch to fill would sit it out whole.
LONG_WAIT = 30.0


def _consumer_on(settings: Settings, values: list[bytes]) -> Consumer:
    topic = settings.topic(f"ready-{uuid.uuid4().hex[:8]}")
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    producer.flush(30)
    consumer = Consumer(consumer_config(settings, f"{topic}-reader",
                                        **{"auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    return consumer


def test_what_has_arrived_is_handed_out_without_waiting_for_a_full_batch(
        isolated: Settings) -> None:
    consumer = _consumer_on(isolated, [b"one", b"two", b"three"])
    try:
        read: list[bytes | None] = []

        def all_read() -> bool:
            began = time.monotonic()
            batch = ready_messages(consumer, 100, LONG_WAIT)
            # Three messages are far from a batch of 100: the read did not sit out its wait.
            assert time.monotonic() - began < LONG_WAIT / 3, "waited for a full batch"
            read.extend(m.value() for m in batch if m.error() is None)
            return len(read) >= 3

        wait_for(all_read, 60, "the three messages")
        assert read == [b"one", b"two", b"three"]
        assert ready_messages(consumer, 100, 0.2) == []
    finally:
        consumer.close()


def test_a_batch_is_never_more_than_asked_for(isolated: Settings) -> None:
    consumer = _consumer_on(isolated, [bytes([n]) for n in range(10)])
    try:
        sizes: list[int] = []

        def all_read() -> bool:
            batch = ready_messages(consumer, 4, 5.0)
            sizes.append(len(batch))
            return sum(sizes) >= 10

        wait_for(all_read, 60, "the ten messages")
        assert max(sizes) <= 4 and sum(sizes) == 10, sizes
    finally:
        consumer.close()
