"""partition_for agrees with librdkafka's murmur2 partitioner on a real broker."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import PARTITIONER
from cronlog.infra.kafka.partitioner import partition_for

pytestmark = pytest.mark.integration


def test_partition_for_matches_the_client_partitioner(isolated: Settings) -> None:
    topic = isolated.topic("partitioner-check")
    partitions = 7
    admin = AdminClient({"bootstrap.servers": isolated.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": isolated.kafka_bootstrap,
                         "partitioner": PARTITIONER})
    keys = [str(uuid.uuid4()) for _ in range(200)] + ["", "a", "ab", "abc", "abcd", "abcde"]
    placed: dict[str, int] = {}

    def delivered(err: object, msg: object) -> None:
        assert err is None
        placed[msg.key().decode()] = msg.partition()  # type: ignore[attr-defined]

    for key in keys:
        producer.produce(topic, key=key.encode(), value=b"x", on_delivery=delivered)
    producer.flush(30)
    assert len(placed) == len(set(keys) - {""}) + ("" in placed)
    assert {k: partition_for(k, partitions) for k in placed} == placed
