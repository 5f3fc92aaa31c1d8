"""The one-by-one fallback of LogBounds is bounded as a whole, not only per call (a fake
offsets query and clock; the batched path runs against Kafka in tests/integration)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from cronlog.infra.kafka.log_bounds import LEADER_RETRY, ONE_TIMEOUT, bounds_one_by_one


class SlowOffsets:
    """Answers every partition, each after the whole timeout it is given."""

    def __init__(self) -> None:
        self.now = 0.0
        self.asked: list[tuple[str, int]] = []
        self.timeouts: list[float] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        assert cached is False
        self.asked.append((tp.topic, tp.partition))
        self.timeouts.append(timeout)
        self.now += timeout
        return 0, tp.partition * 10


def test_every_partition_answered_within_the_budget_is_returned() -> None:
    fast = SlowOffsets()
    keys = [("t", p) for p in range(4)]
    assert bounds_one_by_one(lambda tp, timeout, cached: (0, tp.partition * 10), keys,
                             budget=15, clock=fast.clock) == {
        ("t", p): (0, p * 10) for p in range(4)}


def test_slow_answers_stop_at_the_budget_not_after_every_partition() -> None:
    slow = SlowOffsets()
    keys = [("t", p) for p in range(512)]
    with pytest.raises(KafkaException, match="5 of 512 partitions answered within 15 s"):
        bounds_one_by_one(slow, keys, budget=15, clock=slow.clock)
    # Five full calls of 3 s used the budget; the sixth was never made.
    assert slow.asked == [("t", p) for p in range(5)]
    assert slow.timeouts == [ONE_TIMEOUT] * 5


def test_the_last_call_gets_only_what_is_left_of_the_budget() -> None:
    slow = SlowOffsets()
    with pytest.raises(KafkaException, match="3 of 9 partitions answered within 7 s"):
        bounds_one_by_one(slow, [("t", p) for p in range(9)], budget=7, clock=slow.clock)
    assert slow.timeouts == [3.0, 3.0, 1.0]


def test_a_partition_without_a_known_leader_is_asked_again_within_the_budget() -> None:
    """With leader_retry (LogBounds); without it (the fetch watchdog, on an owner's loop)
    the first refusal is raised."""
    clock = SlowOffsets()
    refusals = {("t", 1): 2}
    slept: list[float] = []

    def ask(tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        key = (tp.topic, tp.partition)
        if refusals.get(key, 0):
            refusals[key] -= 1
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        return 0, tp.partition

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    keys = [("t", p) for p in range(3)]
    assert bounds_one_by_one(ask, keys, budget=15, clock=clock.clock,
                             leader_retry=LEADER_RETRY, sleep=sleep) == {
        ("t", p): (0, p) for p in range(3)}
    assert slept == [LEADER_RETRY, LEADER_RETRY]
    refusals[("t", 0)] = 1000
    with pytest.raises(KafkaException, match="0 of 3 partitions answered within 1 s"):
        bounds_one_by_one(ask, keys, budget=1, clock=clock.clock, leader_retry=LEADER_RETRY,
                          sleep=sleep)
    refusals[("t", 0)] = 1
    with pytest.raises(KafkaException, match="NOT_LEADER_FOR_PARTITION"):
        bounds_one_by_one(ask, keys, budget=15, clock=clock.clock, sleep=sleep)


def test_another_error_is_raised_at_once() -> None:
    def ask(tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        bounds_one_by_one(ask, [("t", 0)], budget=15, leader_retry=LEADER_RETRY,
                          sleep=lambda s: None)
