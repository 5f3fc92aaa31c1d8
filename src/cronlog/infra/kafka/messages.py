"""Decoding consumed Kafka messages into cronlog's InboundMessage."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, Message

from cronlog.commands.ports import InboundMessage

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
    return InboundMessage(
        topic=str(message.topic()), partition=int(message.partition() or 0),
        offset=int(message.offset() or 0), name=name, record=record, raw=value,
    )
