"""How the owner's transaction reads a failure: a fence met while producing surfaces as
_FATAL, not _FENCED; with a twin of the same instance id in the group it must stop the
process (OwnerFenced), not take the transactional id back from the twin (a CI run once saw
a fenced twin do that and go on while the other exited)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from cronlog.infra.config import Settings
from cronlog.infra.kafka.owner_transaction import OwnerFenced, OwnerTransaction, TransactionAborted
from cronlog.infra.kafka.scheduler_identity import scheduler_client_id


class _Producer:
    def abort_transaction(self, timeout: float) -> None:
        pass


def _transaction(twin: bool) -> OwnerTransaction:
    settings = Settings(instance_id="twin")
    mine = scheduler_client_id("twin")
    members = [(mine, "me")] + ([(mine, "other")] if twin else [])
    return OwnerTransaction(settings, codec=None, producer_config={},  # type: ignore[arg-type]
                            members=lambda _settings: members, group_member=lambda: "me")


FATAL = KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message", fatal=True))


def test_a_fatal_error_with_a_twin_in_the_group_stops_the_owner() -> None:
    with pytest.raises(OwnerFenced):
        _transaction(twin=True)._recover(_Producer(), FATAL)  # type: ignore[arg-type]


def test_a_fatal_error_without_a_twin_replaces_the_producer_and_goes_on() -> None:
    transaction = _transaction(twin=False)
    with pytest.raises(TransactionAborted) as raised:
        transaction._recover(_Producer(), FATAL)  # type: ignore[arg-type]
    assert not isinstance(raised.value, OwnerFenced)
    assert transaction._must_fence


class _FencedOnAbort:
    """A producer whose transaction failed on its own (it asks for an abort), and whose
    abort then meets the fence a twin's new producer put up meanwhile."""

    def abort_transaction(self, timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "Failed to end transaction",
                                         fatal=True))


ABORTABLE = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to add offsets",
                                      txn_requires_abort=True))


def test_a_fence_met_by_the_abort_with_a_twin_in_the_group_stops_the_owner() -> None:
    with pytest.raises(OwnerFenced):
        _transaction(twin=True)._recover(_FencedOnAbort(), ABORTABLE)  # type: ignore[arg-type]


def test_a_fence_met_by_the_abort_without_a_twin_replaces_the_producer_and_goes_on() -> None:
    transaction = _transaction(twin=False)
    with pytest.raises(TransactionAborted) as raised:
        transaction._recover(_FencedOnAbort(), ABORTABLE)  # type: ignore[arg-type]
    assert not isinstance(raised.value, OwnerFenced)
    assert transaction._must_fence
