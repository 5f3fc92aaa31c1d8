"""KafkaOwnerTransport.put_back without a broker: what a cycle out of budget did not decide
comes first in the next poll, each partition in order and a WorkerReports message whole,
and until then each partition's committed position is its first message left (issue 33)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition

from cronlog.infra.kafka import owner_transport
from cronlog.infra.kafka.inbox_backlog import InboxBacklog
from cronlog.infra.kafka.owner_transport import KafkaOwnerTransport
from cronlog.ports import InboundMessage


class Consumer:
    """A consumer that has fetched up to `positions` and has nothing more."""

    def __init__(self, positions: dict[int, int]) -> None:
        self.positions = positions

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return []

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.positions[tp.partition])
                for tp in partitions]


class Watchdog:
    def check(self) -> None:
        pass


def transport(positions: dict[int, int]) -> KafkaOwnerTransport:
    # Only what poll and the positions use; no client is built.
    made = object.__new__(KafkaOwnerTransport)
    made._inbox = "inbox"
    made._consumer = Consumer(positions)  # type: ignore[assignment]
    made._watchdog = Watchdog()  # type: ignore[assignment]
    made._assigned = set(positions)
    made._backlog = InboxBacklog()
    made._settled = {}
    made._start_offsets = {}
    made._handing_over = False
    return made


def message(partition: int, offset: int, name: str = "CreateJob") -> InboundMessage:
    return InboundMessage("inbox", partition, offset, name, {"n": offset}, b"")


def committed(owner: KafkaOwnerTransport) -> dict[int, int]:
    return {tp.partition: tp.offset for tp in owner._positions()}


def test_what_is_put_back_is_handed_out_first_and_holds_the_committed_position() -> None:
    owner = transport({0: 10, 1: 5, 2: 4})
    # The cycle decided up to offset 5 of partition 0 and 2 of partition 1; offset 7 of
    # partition 0 is a WorkerReports message of two reports.
    left = [message(0, 6), message(1, 3), message(0, 7, "AttemptStarted"),
            message(0, 7, "AttemptFinished"), message(1, 4), message(0, 8), message(0, 9)]
    owner.put_back(left)
    assert committed(owner) == {0: 6, 1: 3, 2: 4}, "each partition at its first message left"
    polled = owner.poll(0.0, 100)
    for partition in (0, 1):
        assert [m for m in polled if m.partition == partition] == [
            m for m in left if m.partition == partition], "in order, once each"
    assert committed(owner) == {0: 10, 1: 5, 2: 4}, "all handed out: the consumer's position"


def test_everything_put_back_is_handed_out_again_whatever_the_poll_asks_for() -> None:
    # The poll's size bounds the new messages read: what the owner read but did not decide
    # comes back whole, so the new ones behind it reach the owner too (issue 34).
    owner = transport({0: 10})
    owner.put_back([message(0, o) for o in range(4, 10)])
    first = owner.poll(0.0, 2)
    assert [m.offset for m in first] == [4, 5, 6, 7, 8, 9]
    assert committed(owner) == {0: 10}
    # The owner had no time for 5 onwards: they go back, and hold the position at 5.
    owner.put_back(first[1:])
    assert committed(owner) == {0: 5}
    assert [m.offset for m in owner.poll(0.0, 100)] == [5, 6, 7, 8, 9]


def test_past_the_most_kept_the_rest_stays_kept_with_its_position(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(owner_transport, "MOST_KEPT", 3)
    owner = transport({0: 10})
    owner.put_back([message(0, o) for o in range(4, 10)])
    assert [m.offset for m in owner.poll(0.0, 100)] == [4, 5, 6]
    assert committed(owner) == {0: 7}
    assert [m.offset for m in owner.poll(0.0, 100)] == [7, 8, 9]


def test_messages_of_partitions_no_longer_assigned_are_dropped() -> None:
    owner = transport({0: 3})
    owner.put_back([message(0, 2), message(7, 1)])
    assert [(m.partition, m.offset) for m in owner.poll(0.0, 100)] == [(0, 2)]


class Fetched:
    """A consumed Kafka message, as poll reads it."""

    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return b"CreateJob"

    def key(self) -> bytes:
        return b"job"

    def topic(self) -> str:
        return "inbox"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class FetchingConsumer(Consumer):
    """A consumer that has `waiting` fetched, handed out in order."""

    def __init__(self, positions: dict[int, int], waiting: list[Fetched]) -> None:
        super().__init__(positions)
        self.waiting = waiting

    def poll(self, timeout: float) -> Fetched | None:
        return self.waiting.pop(0) if self.waiting else None

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        taken, self.waiting = self.waiting[:num_messages], self.waiting[num_messages:]
        return taken


class Decoder:
    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]:
        return data.decode(), {}


def test_new_messages_behind_a_kept_backlog_reach_the_owner_in_the_same_poll() -> None:
    """A busy tenant's deferred messages are kept; another tenant's command arriving behind
    them must reach the owner, which may decide it first (commands/owner/inbox_shares.py)."""
    owner = transport({0: 106, 1: 50})
    owner._decoder = Decoder()
    owner._consumer = FetchingConsumer(  # type: ignore[assignment]
        {0: 106, 1: 50}, [Fetched(0, 106), Fetched(1, 50)])
    owner.put_back([message(0, o) for o in range(100, 106)])
    # The owner asked for fewer messages than it has kept: the new ones come all the same.
    polled = owner.poll(0.0, 2)
    assert [(m.partition, m.offset) for m in polled] == [
        *((0, o) for o in range(100, 106)), (0, 106), (1, 50)]
