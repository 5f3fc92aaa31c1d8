"""KafkaOwnerTransport: the inbox consumer and the transactional producer of a scheduler.

One Kafka transaction per owner cycle carries the cycle's events, dispatches and replies
together with the consumed inbox offsets and the consumer's group metadata (KIP-447), so a
zombie owner's commit is rejected once the group has moved its partitions elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cronlog.commands.partition_owner import Outgoing, Produced
from cronlog.commands.ports import InboundMessage
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config, transactional_producer_config
from cronlog.infra.kafka.messages import MessageDecoder, MessageEncoder, inbound

log = logging.getLogger(__name__)


class OwnerFenced(RuntimeError):
    """This process is no longer the owner: its transaction was rejected."""


class TransactionAborted(RuntimeError):
    """The cycle's transaction was aborted; the inbox was rewound to its committed offsets."""


class KafkaOwnerTransport:
    def __init__(self, settings: Settings, codec: MessageEncoder, decoder: MessageDecoder,
                 on_assign: Callable[[list[int]], None],
                 on_revoke: Callable[[list[int]], None]) -> None:
        self._settings = settings
        self._codec = codec
        self._decoder = decoder
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._inbox = settings.inbox_topic
        self._transactional_id = f"{settings.group_prefix}-owner-{settings.instance_id}"
        self._consumer = Consumer(consumer_config(
            settings, f"{settings.group_prefix}-schedulers",
            **{"partition.assignment.strategy": "cooperative-sticky",
               "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000,
               "max.poll.interval.ms": 120000},
        ))
        self._producer = self._new_producer()
        self._assigned: set[int] = set()
        # Where each assigned partition started: the offset to commit until one is consumed.
        self._start_offsets: dict[int, int] = {}

    def _new_producer(self) -> Producer:
        producer = Producer(transactional_producer_config(self._settings, self._transactional_id))
        producer.init_transactions(60)
        return producer

    def start(self) -> None:
        self._consumer.subscribe([self._inbox], on_assign=self._assigned_cb,
                                 on_revoke=self._revoked_cb, on_lost=self._revoked_cb)

    def _assigned_cb(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = sorted(tp.partition for tp in partitions)
        self._assigned.update(numbers)
        if numbers:
            committed = self._consumer.committed(
                [TopicPartition(self._inbox, p) for p in numbers], timeout=30)
            for tp in committed:
                self._start_offsets[tp.partition] = max(tp.offset, 0)
            self._on_assign(numbers)

    def _revoked_cb(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = sorted(tp.partition for tp in partitions)
        self._assigned.difference_update(numbers)
        if numbers:
            self._on_revoke(numbers)

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._assigned)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        messages = self._consumer.consume(num_messages=max_messages, timeout=timeout)
        decoded = (inbound(m, self._decoder) for m in messages)
        return [m for m in decoded if m is not None]

    def transact(self, outgoing: Sequence[Outgoing]) -> list[Produced]:
        """Produces outgoing and the inbox positions in one transaction, or raises."""
        produced: list[Produced] = []
        failures: list[str] = []
        try:
            self._producer.begin_transaction()
            for out in outgoing:
                raw = self._codec.encode(out.name, out.record)

                def delivered(err: KafkaError | None, msg: object, out: Outgoing = out,
                              raw: bytes = raw) -> None:
                    if err is not None:
                        failures.append(str(err))
                        return
                    produced.append(Produced(
                        out.topic, msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                        out.name, out.record, raw))

                self._produce(out.topic, out.key, raw, delivered)
            positions = [
                tp if tp.offset >= 0 else TopicPartition(
                    self._inbox, tp.partition, self._start_offsets.get(tp.partition, 0))
                for tp in self._consumer.position(
                    [TopicPartition(self._inbox, p) for p in sorted(self._assigned)])
            ]
            # Also with nothing consumed: the group metadata is what fences a zombie.
            self._producer.send_offsets_to_transaction(
                positions, self._consumer.consumer_group_metadata(), 30)
            self._producer.flush(30)
            if failures:
                raise KafkaException(KafkaError(KafkaError._FAIL, "; ".join(failures[:3])))
            self._producer.commit_transaction(60)
        except KafkaException as exc:
            self._recover(exc)
        return produced

    def _produce(self, topic: str, key: str, raw: bytes, delivered: Callable[..., None]) -> None:
        while True:
            try:
                self._producer.produce(topic, value=raw, key=key.encode(), on_delivery=delivered)
                return
            except BufferError:
                self._producer.poll(0.05)

    def _recover(self, exc: KafkaException) -> None:
        error: KafkaError = exc.args[0]
        log.warning("owner transaction failed: %s", error)
        if error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                            KafkaError.INVALID_PRODUCER_EPOCH):
            self._rebuild_after_fatal()
            self._rewind()
            raise OwnerFenced(str(error)) from exc
        if error.fatal():
            self._rebuild_after_fatal()
            self._rewind()
            raise OwnerFenced(str(error)) from exc
        try:
            self._producer.abort_transaction(30)
        except KafkaException as abort_exc:
            log.warning("abort failed: %s", abort_exc)
            self._rebuild_after_fatal()
        self._rewind()
        raise TransactionAborted(str(error)) from exc

    def _rebuild_after_fatal(self) -> None:
        # A fatal producer cannot be used again; a new one with the same transactional id
        # bumps the epoch and aborts whatever the old one left open.
        self._producer = self._new_producer()

    def _rewind(self) -> None:
        """Goes back to the committed inbox offsets so the aborted cycle's input is re-read."""
        if not self._assigned:
            return
        committed = self._consumer.committed(
            [TopicPartition(self._inbox, p) for p in sorted(self._assigned)], timeout=30)
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else 0
            try:
                self._consumer.seek(TopicPartition(self._inbox, tp.partition, offset))
            except KafkaException as exc:
                log.warning("seek %s failed: %s", tp, exc)

    def close(self) -> None:
        try:
            self._consumer.close()
        finally:
            self._producer.flush(10)
