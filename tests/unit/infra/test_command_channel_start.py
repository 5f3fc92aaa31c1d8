"""The api's reply reader starts from each replies partition's end, asked again while a
fresh topic's partitions have no leader (an api started beside a new 1,024-partition topic
exited with NOT_LEADER_FOR_PARTITION)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from cronlog.infra.kafka.command_channel import log_ends
from tests.support.clock import FakeClock

KEYS = [("replies", 0), ("replies", 1)]


class Broker:
    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.asked = 0

    def bounds(self, keys: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
        self.asked += 1
        if self.asked <= self.refusals:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        return {key: (0, 10 + key[1]) for key in keys}


def test_the_ends_are_the_high_offsets() -> None:
    clock = FakeClock()
    assert log_ends(Broker(0).bounds, KEYS, 60, clock=clock, sleep=clock.sleep) == {
        ("replies", 0): 10, ("replies", 1): 11}


def test_a_partition_without_a_leader_yet_is_asked_again() -> None:
    broker, clock = Broker(3), FakeClock()
    ends = log_ends(broker.bounds, KEYS, 60, pause=0.5, clock=clock, sleep=clock.sleep)
    assert ends == {("replies", 0): 10, ("replies", 1): 11}
    assert broker.asked == 4
    assert clock.seconds == pytest.approx(1.5)


def test_it_gives_up_with_the_brokers_error_after_the_bound() -> None:
    broker, clock = Broker(10_000), FakeClock()
    with pytest.raises(KafkaException) as raised:
        log_ends(broker.bounds, KEYS, 5, pause=0.5, clock=clock, sleep=clock.sleep)
    assert raised.value.args[0].code() == KafkaError.NOT_LEADER_FOR_PARTITION
    assert clock.seconds <= 5
    assert broker.asked == 10
