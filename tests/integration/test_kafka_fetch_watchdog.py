"""StalledFetchWatchdog against a real broker: partitions that are read, or have nothing
to read, are left alone; a partition whose messages never reach the application is
assigned again at its committed offset, once."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.fetch_watchdog import StalledFetchWatchdog
from cronlog.infra.kafka.log_bounds import LogBounds
from tests.support.clock import FakeClock
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


def _topic_with(settings: Settings, name: str, partitions: int, values: list[bytes]) -> str:
    topic = settings.topic(name)
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    producer.flush(30)
    return topic


def _checks(watchdog: StalledFetchWatchdog, clock: FakeClock,
            times: int) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for _ in range(times):
        clock.advance(10.0)
        found += watchdog.check()
    return found


# With an admin client the log bounds of many partitions come in one request.
BOUNDS = pytest.mark.parametrize("batched", [False, True], ids=["per-partition", "batched"])


def _bounds(settings: Settings, batched: bool) -> LogBounds | None:
    return LogBounds(settings) if batched else None


@BOUNDS
def test_partitions_being_read_or_with_nothing_to_read_are_left_alone(
        isolated: Settings, batched: bool) -> None:
    name = f"watchdog-healthy-{batched}".lower()
    topic = _topic_with(isolated, name, 3, [b"x"] * 5)
    consumer = Consumer(consumer_config(isolated, isolated.topic(name)))
    consumer.subscribe([topic])
    clock = FakeClock()
    watchdog = StalledFetchWatchdog(consumer, every=1.0, clock=clock,
                                    bounds=_bounds(isolated, batched))
    got: list[object] = []

    def five_read() -> bool:
        got.extend(consumer.consume(10, 0.5))
        return len(got) >= 5

    try:
        wait_for(five_read, 60, "the five messages")
        # Partition 0 was read; 1 and 2 never had a message.
        assert _checks(watchdog, clock, 3) == []
    finally:
        consumer.close()


@BOUNDS
def test_a_partition_never_read_is_assigned_again_at_its_committed_offset(
        isolated: Settings, batched: bool) -> None:
    name = f"watchdog-stalled-{batched}".lower()
    topic = _topic_with(isolated, name, 1, [str(i).encode() for i in range(6)])
    group = isolated.topic(name)
    setup = Consumer(consumer_config(isolated, group))
    setup.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    setup.close()
    consumer = Consumer(consumer_config(isolated, group))
    # Assigned but paused, nothing of it reaches the application: from outside, what a
    # partition stranded by a lost offset answer looks like.
    consumer.incremental_assign([TopicPartition(topic, 0, 0)])
    consumer.pause([TopicPartition(topic, 0)])
    clock = FakeClock()
    watchdog = StalledFetchWatchdog(consumer, every=1.0, clock=clock,
                                    bounds=_bounds(isolated, batched))
    try:
        assert consumer.consume(10, 1.0) == []
        clock.advance(10.0)
        assert watchdog.check() == [], "one look is not enough"
        clock.advance(10.0)
        assert watchdog.check() == [(topic, 0)]
        # The pause stands in for the stall and outlives the new assignment; lifted, the
        # messages come from the committed offset 4, not from the 0 it was assigned at.
        consumer.resume([TopicPartition(topic, 0)])
        values: list[bytes | None] = []

        def two_read() -> bool:
            values.extend(m.value() for m in consumer.consume(10, 0.5) if m.error() is None)
            return len(values) >= 2

        wait_for(two_read, 60, "the messages past the committed offset")
        assert values == [b"4", b"5"]
        assert _checks(watchdog, clock, 3) == [], "a partition being read is left alone"
    finally:
        consumer.close()
