"""KafkaOwnerTransport against a real broker: the inbox messages of a partition whose owner
is still catching up are kept back, and its committed position stays at the first of them
through the owner's transactions, until the partition is released."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.ports import InboundMessage
from tests.support.owner_kafka import committed, owning_transport
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


def test_a_held_partition_is_neither_handed_out_nor_committed_until_released(
        isolated: Settings) -> None:
    transport = owning_transport(isolated, AvroCodec())
    try:
        transport.hold([0])
        producer = Producer({"bootstrap.servers": isolated.kafka_bootstrap})
        for partition, count in ((0, 3), (1, 2)):
            for i in range(count):
                # Bytes that do not decode come out as UNREADABLE messages: enough here.
                producer.produce(isolated.inbox_topic, value=f"junk-{partition}-{i}".encode(),
                                 partition=partition)
        producer.flush(30)
        seen: list[InboundMessage] = []

        def from_partition(partition: int, count: int) -> bool:
            seen.extend(transport.poll(0.2, 100))
            return len([m for m in seen if m.partition == partition]) >= count

        wait_for(lambda: from_partition(1, 2), 30, "partition 1's messages")
        assert not [m for m in seen if m.partition == 0], "held back"
        transport.transact([])
        assert committed(isolated, 0) == 0, "a held partition's position does not move"
        assert committed(isolated, 1) == 2

        transport.release([0])
        seen.clear()
        wait_for(lambda: from_partition(0, 3), 30, "partition 0's messages once released")
        assert [m.offset for m in seen if m.partition == 0] == [0, 1, 2], "in order, once each"
        transport.transact([])
        assert committed(isolated, 0) == 3
    finally:
        transport.close()
