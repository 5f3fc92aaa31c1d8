"""KafkaDeliveryLog without a broker: what an AttemptRecord becomes on the topic, and how the
producer's troubles reach the notifier (LogUnavailable, never a silent loss)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from cronlog.domain.catalogue import AlertDelivery
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.notifier.kafka_delivery_log import KafkaDeliveryLog, attempt_record
from cronlog.notifications.model import AttemptOutcome, TenantAlert
from cronlog.ports import LogUnavailable
from tests.support import delivery_records as records


class FakeProducer:
    """Acknowledges what it is given at flush, or fails as told."""

    def __init__(self, refuse: KafkaError | None = None, unacknowledged: int = 0,
                 full: int = 0, raises: Exception | None = None) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []
        self._callbacks: list[Any] = []
        self._refuse, self._unacknowledged, self._full = refuse, unacknowledged, full
        self._raises = raises
        self.flushes = 0

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None:
        if self._raises is not None:
            raise self._raises
        if self._full:
            self._full -= 1
            raise BufferError("Local: Queue full")
        self.sent.append((topic, key, value))
        self._callbacks.append(on_delivery)

    def poll(self, timeout: float) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        for callback in self._callbacks:
            callback(self._refuse, None)
        self._callbacks.clear()
        return self._unacknowledged


def log_with(producer: FakeProducer) -> KafkaDeliveryLog:
    return KafkaDeliveryLog(Settings(topic_prefix="t."), AvroCodec(), within=0.1,
                            producer=producer)


def test_each_attempt_is_one_record_keyed_by_its_job() -> None:
    producer = FakeProducer()
    retrying = records.attempt_record(outcome=AttemptOutcome.RETRYING)
    delivered = records.attempt_record(attempt=2)
    log_with(producer).record([retrying, delivered])
    assert [(t, k) for t, k, _ in producer.sent] == [
        ("t.alert-deliveries", str(retrying.delivery.alert.job_id).encode())] * 2
    name, first = AvroCodec().decode(producer.sent[0][2])
    assert name == AlertDelivery.ATTEMPTED
    assert first == {**attempt_record(retrying), "kind": "dead_lettered", "outcome": "retrying",
                     "channel_kind": "webhook"}
    assert first["next_attempt_at"] == retrying.next_attempt_at
    assert (first["status_code"], first["error"], first["run_attempt"]) == (503, "HTTP 503", 3)
    assert AvroCodec().decode(producer.sent[1][2])[1]["attempt"] == 2


def test_a_tenant_alert_and_a_digest_keep_their_kind_and_count() -> None:
    digest = replace(records.alert(run_id=None, attempt=None, digest_count=12),
                     kind=TenantAlert.QUEUE_UNSERVED)
    record = records.attempt_record()
    record = replace(record, delivery=replace(record.delivery, alert=digest))
    fields = attempt_record(record)
    assert (fields["kind"], fields["run_id"], fields["run_attempt"],
            fields["digest_count"]) == ("queue_unserved", None, None, 12)
    assert AvroCodec().decode(AvroCodec().encode(AlertDelivery.ATTEMPTED, fields))[1] == fields


def test_nothing_to_record_sends_nothing() -> None:
    producer = FakeProducer()
    log_with(producer).record([])
    assert producer.sent == [] and producer.flushes == 0


@pytest.mark.parametrize("producer", [
    FakeProducer(refuse=KafkaError(KafkaError._MSG_TIMED_OUT)),
    FakeProducer(unacknowledged=1),
    FakeProducer(raises=KafkaException(KafkaError(KafkaError._TRANSPORT))),
    FakeProducer(full=2),
], ids=["refused", "not-acknowledged", "kafka-error", "queue-full"])
def test_what_is_not_acknowledged_is_log_unavailable(producer: FakeProducer) -> None:
    with pytest.raises(LogUnavailable, match=r"t\.alert-deliveries"):
        log_with(producer).record([records.attempt_record()])


def test_a_full_queue_is_drained_once_then_taken() -> None:
    producer = FakeProducer(full=1)
    log_with(producer).record([records.attempt_record()])
    assert len(producer.sent) == 1
