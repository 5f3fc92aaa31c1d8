"""Decoding consumed Kafka messages into cronlog's InboundMessage."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message

from cronlog.domain.catalogue import Report
from cronlog.ports import UNREADABLE, InboundMessage

log = logging.getLogger(__name__)


class MessageDecoder(Protocol):
    def decode(self, data: bytes) -> tuple[str, dict[str, Any]]: ...


class MessageEncoder(Protocol):
    def encode(self, name: str, record: Any) -> bytes: ...


def inbound(message: Message, decoder: MessageDecoder) -> InboundMessage | None:
    """None for partition-EOF notices and passing broker trouble (the client retries by
    itself, e.g. while a broker restarts); raises for fatal consumer errors."""
    error = message.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            return None
        if error.fatal():
            raise KafkaException(error)
        log.warning("consumer: %s", error)
        return None
    value = message.value()
    if value is None:
        raise ValueError(f"{message.topic()}[{message.partition()}]@{message.offset()} has no value")
    name, record = decoder.decode(value)
    key = message.key()
    return InboundMessage(
        topic=str(message.topic()), partition=int(message.partition() or 0),
        offset=int(message.offset() or 0), name=name, record=record, raw=value,
        key=key.decode(errors="replace") if isinstance(key, bytes) else key,
    )


def inbound_or_unreadable(message: Message, decoder: MessageDecoder) -> InboundMessage | None:
    """Like inbound, but bytes that do not decode (anyone may write to the inbox) come back
    as an UNREADABLE message for the owner to set aside, instead of raising: one bad
    message must not stop its partition (DESIGN invariant 9)."""
    try:
        return inbound(message, decoder)
    except ValueError as exc:  # CodecError is a ValueError, so is a message without value
        return InboundMessage(
            topic=str(message.topic()), partition=int(message.partition() or 0),
            offset=int(message.offset() or 0), name=UNREADABLE,
            record={"error": f"{type(exc).__name__}: {exc}"}, raw=message.value() or b"")


WORKER_REPORTS = Report.WORKER_REPORTS


def worker_reports(message: InboundMessage) -> list[InboundMessage]:
    """The single reports a WorkerReports message stands for: its starts, then its finishes,
    each at the message's place in the inbox."""
    worker = message.record["worker"]
    reports = [(Report.ATTEMPT_STARTED, item) for item in message.record["started"]]
    reports += [(Report.ATTEMPT_FINISHED, item) for item in message.record["finished"]]
    return [InboundMessage(topic=message.topic, partition=message.partition,
                           offset=message.offset, name=name, record={**item, "worker": worker},
                           raw=b"")
            for name, item in reports]


def worker_reports_or_unreadable(message: InboundMessage) -> list[InboundMessage]:
    try:
        return worker_reports(message)
    except (KeyError, TypeError) as exc:
        return [InboundMessage(topic=message.topic, partition=message.partition,
                               offset=message.offset, name=UNREADABLE,
                               record={"error": f"{type(exc).__name__}: {exc}"},
                               raw=message.raw)]
