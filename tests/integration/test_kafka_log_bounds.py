"""LogBounds against a real broker: one batched request gives each partition's first offset
and last stable offset; when that request fails, asking one partition at a time gives the
same answer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka import log_bounds
from cronlog.infra.kafka.log_bounds import BATCH_ATTEMPTS, LogBounds

pytestmark = pytest.mark.integration


def _topic(settings: Settings) -> tuple[str, Producer]:
    """Partition 0: 3 committed messages; 1: 2 committed then 1 in a transaction left
    open; 2: empty."""
    topic = settings.topic("bounds")
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    plain = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for partition, count in ((0, 3), (1, 2)):
        for _ in range(count):
            plain.produce(topic, value=b"x", partition=partition)
    plain.flush(30)
    open_txn = Producer({"bootstrap.servers": settings.kafka_bootstrap,
                         "transactional.id": f"{topic}-open"})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, value=b"undecided", partition=1)
    open_txn.flush(30)
    return topic, open_txn


EXPECTED = {0: (0, 3), 1: (0, 2), 2: (0, 0)}


def test_one_request_gives_first_and_last_stable_offsets(isolated: Settings) -> None:
    topic, open_txn = _topic(isolated)
    try:
        found = LogBounds(isolated).of([(topic, p) for p in range(3)])
        assert found == {(topic, p): bounds for p, bounds in EXPECTED.items()}
    finally:
        open_txn.abort_transaction(30)


def test_when_the_batched_request_fails_partitions_are_asked_one_by_one(
        isolated: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    topic, open_txn = _topic(isolated)
    admins: list[object] = []

    def fenced(admin: object, _keys: object) -> object:
        admins.append(admin)
        raise KafkaException(KafkaError(KafkaError.FENCED_LEADER_EPOCH, "stale epoch"))

    monkeypatch.setattr(log_bounds, "_bounds", fenced)
    try:
        found = LogBounds(isolated).of([(topic, p) for p in range(3)])
        assert found == {(topic, p): bounds for p, bounds in EXPECTED.items()}
        # Each attempt of the batched request starts from a new client (fresh metadata).
        assert len(admins) == BATCH_ATTEMPTS and len({id(a) for a in admins}) == BATCH_ATTEMPTS
    finally:
        open_txn.abort_transaction(30)


def test_offsets_at_an_instant_are_the_first_written_then_or_after(isolated: Settings) -> None:
    """What `cronlog verify` starts its run events from: each partition's first offset
    with a timestamp at or after the instant, or its end when none is."""
    topic = isolated.topic("bounds-at")
    admin = AdminClient({"bootstrap.servers": isolated.kafka_bootstrap})
    admin.create_topics(
        [NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)
    plain = Producer({"bootstrap.servers": isolated.kafka_bootstrap})
    base = 1_780_000_000_000  # milliseconds, 2026
    for offset in range(4):
        plain.produce(topic, value=b"x", partition=0, timestamp=base + offset * 60_000)
    plain.produce(topic, value=b"x", partition=1, timestamp=base)
    plain.flush(30)
    at = datetime.fromtimestamp((base + 90_000) / 1000, UTC)  # between offsets 1 and 2
    found = LogBounds(isolated).at([(topic, 0), (topic, 1)], at)
    assert found == {(topic, 0): 2, (topic, 1): 1}
