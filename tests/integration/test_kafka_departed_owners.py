"""KafkaDepartedOwnerFence against a real broker (issue 34, item 3): a scheduler killed with
its transaction open holds back every read_committed reader of the partitions it wrote to;
the owner taking its partitions ends that transaction at once, and never fences a scheduler
still in the group."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import (
    consumer_config,
    producer_config,
    transactional_producer_config,
)
from cronlog.infra.kafka.departed_owners import KafkaDepartedOwnerFence
from cronlog.infra.kafka.scheduler_identity import (
    owner_transactional_id,
    scheduler_client_id,
    schedulers_group,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


def _topic(settings: Settings) -> str:
    topic = settings.topic(f"fence-{uuid.uuid4().hex[:8]}")
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    return topic


def _open_transaction(settings: Settings, topic: str, instance_id: str) -> Producer:
    """A scheduler's producer that wrote in a transaction and never ended it (killed)."""
    producer = Producer(transactional_producer_config(
        settings, owner_transactional_id(settings, instance_id)))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"job", value=b"left open")
    producer.flush(30)
    return producer


def _stable_end(settings: Settings, topic: str) -> int:
    """The partition's end as a read_committed reader sees it: its last stable offset."""
    consumer = Consumer(consumer_config(settings, None))
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()


def _written_after(settings: Settings, topic: str) -> None:
    producer = Producer(producer_config(settings))
    producer.produce(topic, key=b"job", value=b"the new owner's dispatch")
    producer.flush(30)


def _member(settings: Settings, topic: str, instance_id: str) -> Consumer:
    """A scheduler in the schedulers' group, once it has its assignment."""
    member = Consumer(consumer_config(settings, schedulers_group(settings),
                                      **{"client.id": scheduler_client_id(instance_id)}))
    member.subscribe([topic])
    wait_for(lambda: member.poll(0.2) is None and bool(member.assignment()), 60,
             "the scheduler to join its group")
    return member


def test_a_departed_owner_s_open_transaction_ends_when_its_partitions_are_taken(
        isolated: Settings) -> None:
    topic = _topic(isolated)
    dead = f"dead-{uuid.uuid4().hex[:6]}"
    left_open = _open_transaction(isolated, topic, dead)
    _written_after(isolated, topic)
    # Everything behind the open transaction is held back, the later write included.
    assert _stable_end(isolated, topic) == 0
    taker = _member(isolated, topic, f"taker-{uuid.uuid4().hex[:6]}")
    try:
        assert KafkaDepartedOwnerFence(isolated).fence_departed([dead]) == [dead]
        # Aborted (its marker at offset 2): the later write is readable at once, long
        # before the transaction timeout (60 s).
        wait_for(lambda: _stable_end(isolated, topic) == 3, 5, "the last stable offset to move")
    finally:
        taker.close()
    del left_open


def test_an_earlier_owner_still_in_the_group_is_not_fenced(isolated: Settings) -> None:
    topic = _topic(isolated)
    alive = f"alive-{uuid.uuid4().hex[:6]}"
    member = _member(isolated, topic, alive)
    try:
        open_one = _open_transaction(isolated, topic, alive)
        assert KafkaDepartedOwnerFence(isolated).fence_departed([alive]) == []
        # Its transaction is still its own to commit.
        open_one.commit_transaction(30)
        wait_for(lambda: _stable_end(isolated, topic) == 2, 10, "the commit's marker")
    finally:
        member.close()
