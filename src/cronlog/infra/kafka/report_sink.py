"""KafkaReportSink: sends worker reports to the inbox, keyed by job id."""

from __future__ import annotations

from confluent_kafka import KafkaException, Producer

from cronlog.commands.ports import Record, ReportsNotDelivered
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.messages import MessageEncoder


class KafkaReportSink:
    def __init__(self, settings: Settings, encoder: MessageEncoder) -> None:
        self._topic = settings.inbox_topic
        self._encoder = encoder
        # A worker sends several reports per run: only failed deliveries call back.
        self._producer = Producer(producer_config(settings, **{"delivery.report.only.error": True}))
        self._failures: list[str] = []

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None:
            self._failures.append(str(err))

    def send(self, key: str, name: str, record: Record) -> None:
        value = self._encoder.encode(name, record)
        while True:
            try:
                self._producer.produce(self._topic, value=value, key=key.encode(),
                                       on_delivery=self._delivered)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def flush(self, timeout: float) -> None:
        try:
            remaining = self._producer.flush(timeout)
        except KafkaException as exc:
            raise ReportsNotDelivered(str(exc)) from exc
        if remaining or self._failures:
            failures, self._failures = self._failures, []
            raise ReportsNotDelivered(
                f"{remaining} reports still queued; failures: {failures[:3]}")
