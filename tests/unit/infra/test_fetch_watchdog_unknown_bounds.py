"""StalledFetchWatchdog when the log bounds cannot be had (a new topic whose partitions
have no leader yet): nothing is taken for stalled, nothing is assigned again, and the check
does not wait on every partition in turn (a fake consumer and log bounds; the watchdog
against a real broker is in tests/integration/test_kafka_fetch_watchdog.py)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from cronlog.infra.kafka.fetch_watchdog import StalledFetchWatchdog
from tests.support.clock import FakeClock

KEYS = [("t", p) for p in range(512)]


class NeverReadConsumer:
    """512 assigned partitions never read, none committed, no log end known."""

    def __init__(self) -> None:
        self.offset_queries = 0
        self.assigned_again: list[TopicPartition] = []

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in KEYS]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def committed(self, partitions: list[TopicPartition],
                  timeout: float) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float = 0,
                              cached: bool = False) -> tuple[int, int]:
        if cached:
            return -1, -1
        self.offset_queries += 1
        raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.assigned_again += partitions

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        pass


class UnavailableBounds:
    def __init__(self) -> None:
        self.asked = 0

    def of(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        self.asked += 1
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "log bounds: 0 of 512"))


def test_unknown_bounds_leave_every_partition_alone_and_are_asked_again() -> None:
    consumer, bounds, clock = NeverReadConsumer(), UnavailableBounds(), FakeClock()
    watchdog = StalledFetchWatchdog(consumer, clock=clock, bounds=bounds)  # type: ignore[arg-type]
    for _ in range(3):
        clock.advance(10.0)
        assert watchdog.check() == []
    assert bounds.asked == 3
    # Not asked one partition at a time behind the failed batch: 512 such calls were minutes.
    assert consumer.offset_queries == 0
    assert consumer.assigned_again == []


def test_without_batched_bounds_one_failure_ends_the_check() -> None:
    consumer, clock = NeverReadConsumer(), FakeClock()
    watchdog = StalledFetchWatchdog(consumer, clock=clock)  # type: ignore[arg-type]
    for _ in range(2):
        clock.advance(10.0)
        assert watchdog.check() == []
    assert consumer.offset_queries == 2
    assert consumer.assigned_again == []
