"""How long the owner waits on a transaction: sending the inbox positions has a deadline of
its own, far shorter than the whole transaction's, because librdkafka can wait forever on a
dead group coordinator there (issues 5456, 5511); a transaction slow elsewhere (a commit
over many partitions) is not abandoned for it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import cast

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.kafka import owner_transaction
from cronlog.infra.kafka.owner_transaction import OwnerTransaction, TransactionAborted


class _Producer:
    """A transactional producer whose send_offsets_to_transaction waits for `released`,
    and whose commit takes `commit_seconds`."""

    def __init__(self, offsets_hang: bool, commit_seconds: float = 0.0) -> None:
        self.released = threading.Event()
        if not offsets_hang:
            self.released.set()
        self.commit_seconds = commit_seconds
        self.committed = False
        self.aborted = False

    def begin_transaction(self) -> None:
        pass

    def send_offsets_to_transaction(self, positions: object, group: object,
                                    timeout: float) -> None:
        self.released.wait(10)

    def flush(self, timeout: float) -> int:
        return 0

    def commit_transaction(self, timeout: float) -> None:
        threading.Event().wait(self.commit_seconds)
        self.committed = True

    def abort_transaction(self, timeout: float) -> None:
        self.aborted = True


@pytest.fixture(autouse=True)
def short_deadlines(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(owner_transaction, "OFFSETS_DEADLINE", 0.3)
    monkeypatch.setattr(owner_transaction, "WATCH_INTERVAL", 0.02)
    yield


def _transaction(producer: _Producer) -> OwnerTransaction:
    transaction = OwnerTransaction(Settings(instance_id="one"), codec=None,  # type: ignore[arg-type]
                                   producer_config={}, members=lambda _settings: [],
                                   group_member=lambda: "me")
    transaction._producer = producer  # type: ignore[assignment]
    return transaction


def test_positions_stuck_past_their_deadline_abandon_the_transaction() -> None:
    producer = _Producer(offsets_hang=True)
    transaction = _transaction(producer)
    settled: list[object] = []
    with pytest.raises(TransactionAborted, match="inbox positions"):
        transaction.commit([], group=None, positions=list, settled=settled.append)
    assert transaction._producer is None and transaction._must_fence
    producer.released.set()  # the abandoned thread ends, and must not commit
    transaction._runner.shutdown(wait=True)
    for _ in range(100):
        if producer.aborted:
            break
        threading.Event().wait(0.02)
    assert producer.aborted and not producer.committed and not settled


def test_a_slow_commit_is_not_the_positions_deadline() -> None:
    producer = _Producer(offsets_hang=False, commit_seconds=0.6)
    transaction = _transaction(producer)
    settled: list[object] = []
    assert transaction.commit([], group=None, positions=list, settled=settled.append) == []
    assert producer.committed and settled == [[]]
    # _Producer stands in for confluent_kafka's Producer without being one.
    assert transaction._producer is cast(object, producer) and not transaction._must_fence
