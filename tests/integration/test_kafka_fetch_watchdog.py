"""StalledFetchWatchdog against a real broker: it leaves fetching partitions alone, busy
or idle. (A partition stranded by librdkafka issue 5586 cannot be made on demand; the
chaos test's broker restart is where the watchdog's re-assignment shows in the logs.)"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.fetch_watchdog import StalledFetchWatchdog
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


class SteppedClock:
    def __init__(self) -> None:
        self.at = 0.0

    def __call__(self) -> float:
        return self.at


def _topic(settings: Settings, name: str, partitions: int) -> str:
    topic = settings.topic(name)
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    return topic


def test_fetching_partitions_busy_or_idle_are_left_alone(isolated: Settings) -> None:
    topic = _topic(isolated, "watchdog-healthy", 3)
    producer = Producer({"bootstrap.servers": isolated.kafka_bootstrap})
    for i in range(5):
        producer.produce(topic, value=b"x", partition=0, key=str(i).encode())
    producer.flush(30)
    consumer = Consumer(consumer_config(isolated, isolated.topic("watchdog-healthy")))
    consumer.subscribe([topic])
    clock = SteppedClock()
    watchdog = StalledFetchWatchdog(consumer, every=1.0, clock=clock)
    got: list[object] = []
    try:
        wait_for(lambda: got.extend(consumer.consume(10, 0.5)) or len(got) >= 5, 60,
                 "the five messages")
        # Partitions 1 and 2 never had a message: idle, yet fetching.
        assert watchdog.check() == []  # first sight of the assignment
        clock.at = 5.0
        assert watchdog.check() == [], "a fetching partition was taken for a stalled one"
    finally:
        consumer.close()
