"""An owner's side of a real Kafka broker: a transport that owns the inbox, a catch-up run
to its end, and the schedulers' committed inbox position."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import Consumer, TopicPartition

from cronlog.commands.owner.ports import Claim
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.owner_transport import KafkaOwnerTransport
from cronlog.infra.kafka.scheduler_identity import schedulers_group
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.owner_adapters import OwnerLogReplay
from tests.support.polling import wait_for


def catch_up(replay: OwnerLogReplay, claims: Sequence[Claim]) -> list[int]:
    """Catches up to the end; returns the partitions in the order they caught up."""
    catch_up = replay.start(claims)
    order: list[int] = []
    for _ in range(400):  # 0.05 s a round at least: 20 s
        order += [c.partition for c in catch_up.advance(0.05)]
        if catch_up.finished:
            break
    assert catch_up.finished, f"caught up only {order} of {[c.partition for c in claims]}"
    assert sorted(order) == sorted(c.partition for c in claims), "each handed back once"
    return order


def owning_transport(settings: Settings, codec: AvroCodec) -> KafkaOwnerTransport:
    """An owner's transport that owns the inbox's partitions, for writing as an owner."""
    ensure_core_topics(settings)
    assigned: list[int] = []
    transport = KafkaOwnerTransport(settings, codec, codec, on_assign=assigned.extend,
                                    on_revoke=lambda ps: None)
    transport.start()
    wait_for(lambda: (transport.poll(0.2, 10), assigned)[1], 30, "assignment")
    return transport


def committed(settings: Settings, partition: int) -> int:
    consumer = Consumer(consumer_config(settings, schedulers_group(settings)))
    try:
        [tp] = consumer.committed([TopicPartition(settings.inbox_topic, partition)], timeout=10)
        return int(tp.offset)
    finally:
        consumer.close()
