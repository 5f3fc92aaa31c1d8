"""The notifier's DeliveryLog (notifications/ports.py) on Kafka: each AttemptRecord as an
AlertDeliveryAttempted record on `<prefix>alert-deliveries`, keyed by the job's id like the
history topics, which the history projector writes to ClickHouse's alert_deliveries
(docs/alerts.md, "What was delivered")."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, cast

from confluent_kafka import KafkaError, KafkaException, Producer

from cronlog.domain.catalogue import AlertDelivery
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.messages import MessageEncoder
from cronlog.notifications.model import AttemptRecord
from cronlog.ports import LogUnavailable

log = logging.getLogger(__name__)

# How long record() waits for the broker's acknowledgement of a call's records before it
# says the log is unavailable: the notifier keeps the deliveries' state and records them
# again, which readers absorb ((delivery_id, attempt) is the key).
ACKNOWLEDGED_WITHIN = 15.0


class DeliveryProducer(Protocol):
    """What record() needs of confluent_kafka's Producer (tests pass a fake)."""

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Any) -> None: ...

    def poll(self, timeout: float) -> int: ...

    def flush(self, timeout: float) -> int: ...


def attempt_record(attempt: AttemptRecord) -> dict[str, Any]:
    """The AlertDeliveryAttempted record of one attempt: flat, so the projector and
    analysts need nothing but the record."""
    delivery, alert, result = attempt.delivery, attempt.delivery.alert, attempt.result
    return {
        "delivery_id": delivery.delivery_id, "alert_id": alert.alert_id,
        "tenant": alert.tenant, "job_id": alert.job_id, "job_name": alert.job_name,
        "kind": str(alert.kind), "run_id": alert.run_id, "run_attempt": alert.attempt,
        "digest_count": alert.digest_count, "message": alert.message,
        "channel_id": delivery.channel_id, "channel_name": attempt.channel_name,
        "channel_kind": str(attempt.channel_kind), "attempt": delivery.attempt,
        "outcome": str(attempt.outcome), "status_code": result.status_code,
        "latency_ms": result.latency_ms, "error": result.error, "sent_at": attempt.sent_at,
        "next_attempt_at": attempt.next_attempt_at,
    }


class KafkaDeliveryLog:
    """Produces with an idempotent producer (acks=all) and flushes: record() returns once
    every record of the call is acknowledged, or raises LogUnavailable (nothing is lost
    then: what was not acknowledged is recorded again by the caller, what was is read
    twice as one row). One call costs at most len(attempts) produces and one flush of at
    most `within` seconds."""

    def __init__(self, settings: Settings, encoder: MessageEncoder,
                 within: float = ACKNOWLEDGED_WITHIN,
                 producer: DeliveryProducer | None = None) -> None:
        self._topic = settings.alert_deliveries_topic
        self._encoder = encoder
        self._within = within
        self._producer = producer if producer is not None \
            else cast(DeliveryProducer, Producer(producer_config(settings)))

    def record(self, attempts: Sequence[AttemptRecord]) -> None:
        if not attempts:
            return
        # Encoded first: a record the schema refuses is a bug of ours, raised before
        # anything of the call is sent.
        values = [(str(a.delivery.alert.job_id).encode(),
                   self._encoder.encode(AlertDelivery.ATTEMPTED, attempt_record(a)))
                  for a in attempts]
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, _msg: object) -> None:
            if err is not None:
                errors.append(err)

        try:
            for key, value in values:
                self._produce(key, value, delivered)
            remaining = self._producer.flush(self._within)
        except KafkaException as exc:
            raise LogUnavailable(f"recording alert deliveries on {self._topic}: {exc}") from exc
        if remaining:
            raise LogUnavailable(f"recording alert deliveries on {self._topic}: {remaining} "
                                 f"of {len(values)} not acknowledged within {self._within}s")
        if errors:
            raise LogUnavailable(f"recording alert deliveries on {self._topic}: "
                                 f"{len(errors)} of {len(values)} refused: {errors[0]}")

    def _produce(self, key: bytes, value: bytes, delivered: Any) -> None:
        try:
            self._producer.produce(self._topic, value=value, key=key, on_delivery=delivered)
        except BufferError:
            # The producer's queue is full: let it drain once, then try again; still full
            # means the broker is not taking records.
            self._producer.flush(self._within)
            try:
                self._producer.produce(self._topic, value=value, key=key,
                                       on_delivery=delivered)
            except BufferError as exc:
                raise LogUnavailable(f"recording alert deliveries on {self._topic}: the "
                                     f"producer's queue stays full ({exc})") from exc
        self._producer.poll(0)

    def close(self) -> None:
        self._producer.flush(self._within)
