"""The owner's Kafka transaction: one per cycle, carrying the cycle's events, dispatches
and replies together with the inbox positions and the consumer's group metadata (KIP-447),
so a zombie owner's commit is rejected once the group has moved its partitions elsewhere.

It owns the transactional producer: made when first needed, replaced (which fences what
the old one left open) after a fatal error or a transaction stuck past its deadline."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from cronlog.commands.owner.ports import Outgoing, Produced, TransactionRejected
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import transactional_producer_config
from cronlog.infra.kafka.command_batches import command_replies, reply_chunks, split_replies
from cronlog.infra.kafka.messages import MessageEncoder
from cronlog.infra.kafka.scheduler_identity import owner_transactional_id, scheduler_client_id

# The owner transport's log lines keep one logger name, whichever part writes them.
log = logging.getLogger("cronlog.infra.kafka.owner_transport")

# Every blocking call of the owner's loop is bounded well below max.poll.interval.ms, so a
# broker restart makes the owner retry rather than hang and be dropped from the group.
CALL_TIMEOUT = 10.0
# librdkafka's send_offsets_to_transaction can block past its own timeout while the group
# coordinator is away (librdkafka issues 5456, 5511). A transaction that takes longer than
# this is abandoned: its producer is replaced, which fences it, and its outcome is unknown.
TRANSACTION_DEADLINE = 25.0
# The inbox positions go to the group coordinator librdkafka has cached. When that broker
# dies and drops out of the metadata before its successor is asked for, nothing asks again
# (librdkafka issue 5511) and the call ignores its own timeout (5456): an owner's cycle
# waited 14 s and more when a killed controller had been its group's coordinator (chaos
# cluster-failover). Healthy, the call takes milliseconds; while a killed coordinator is
# replaced, 2-5 s on the 3-node test cluster. Past this the producer is replaced, and the
# new one asks for the coordinator afresh.
OFFSETS_DEADLINE = 8.0
# How often the owner's thread looks at a transaction still under way.
WATCH_INTERVAL = 0.25


class OwnerFenced(TransactionRejected):
    """This process is no longer the owner: its transaction was rejected."""

    fenced = True


class TransactionAborted(TransactionRejected):
    """The cycle's transaction was aborted, or its outcome is not known."""


# Another producer holds this process's transactional id: this process is a zombie of a
# restarted scheduler. Group generation errors (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
# REBALANCE_IN_PROGRESS) are different: the transaction is aborted and the consumer's next
# poll either keeps the partitions under a new generation or revokes them.
FENCING_ERRORS = frozenset({
    KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.FENCED_INSTANCE_ID,
})


class OwnerTransaction:
    def __init__(self, settings: Settings, codec: MessageEncoder,
                 producer_config: dict[str, object],
                 members: Callable[[Settings], list[tuple[str, str]] | None],
                 group_member: Callable[[], str]) -> None:
        """producer_config: added to the transactional producer's (statistics).
        members: the inbox group's members (client id, member id), or None when not
        known; group_member: this process's member id in it."""
        self._settings = settings
        self._codec = codec
        self._producer_config = producer_config
        self._members = members
        self._group_member = group_member
        self._transactional_id = owner_transactional_id(settings, settings.instance_id)
        self._producer: Producer | None = None
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="txn")
        # Bumped when a transaction is abandoned; its thread must not commit afterwards.
        self._generation = 0
        self._must_fence = False
        # (generation, monotonic start) while a transaction sends its inbox positions.
        self._sending_offsets: tuple[int, float] | None = None

    def _new_producer(self) -> Producer:
        producer = Producer({**transactional_producer_config(self._settings,
                                                             self._transactional_id),
                             **self._producer_config})
        producer.init_transactions(CALL_TIMEOUT)
        return producer

    def _ready_producer(self) -> Producer:
        if self._producer is None:
            try:
                self._producer = self._new_producer()
            except KafkaException as exc:
                raise TransactionAborted(f"transactional producer not ready: {exc}") from exc
        return self._producer

    def fence_abandoned(self) -> None:
        """An abandoned transaction must be fenced before anyone reads what it left: a
        new producer with the same transactional id does it."""
        if self._must_fence:
            self._ready_producer()
            self._must_fence = False

    def commit(self, outgoing: Sequence[Outgoing], group: object,
               positions: Callable[[], list[TopicPartition]],
               settled: Callable[[list[TopicPartition]], None]) -> list[Produced]:
        """Produces outgoing and the inbox `positions` (asked for once the records are
        sent) in one transaction with the consumer's `group` metadata, then tells
        `settled` what it committed; or raises TransactionRejected."""
        producer = self._ready_producer()
        generation = self._generation
        future = self._runner.submit(self._transact, producer, outgoing, generation, group,
                                     positions, settled)
        began = time.monotonic()
        while True:
            try:
                return future.result(timeout=WATCH_INTERVAL)
            except FutureTimeout:
                stuck = self._stuck(began, generation)
                if stuck is not None:
                    break
        log.error("owner transaction stuck %s; replacing the producer", stuck)
        self._generation += 1
        self._producer = None
        self._must_fence = True
        # The stuck thread keeps its thread; later transactions get a fresh one.
        self._runner.shutdown(wait=False)
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="txn")
        raise TransactionAborted(f"transaction stuck {stuck}; outcome unknown")

    def _stuck(self, began: float, generation: int) -> str | None:
        now = time.monotonic()
        if now - began >= TRANSACTION_DEADLINE:
            return f"for {TRANSACTION_DEADLINE:.0f}s"
        sending = self._sending_offsets
        if sending is not None and sending[0] == generation \
                and now - sending[1] >= OFFSETS_DEADLINE:
            return f"sending the inbox positions for {OFFSETS_DEADLINE:.0f}s"
        return None

    def _transact(self, producer: Producer, outgoing: Sequence[Outgoing],
                  generation: int, group: object,
                  positions: Callable[[], list[TopicPartition]],
                  settled: Callable[[list[TopicPartition]], None]) -> list[Produced]:
        produced: list[Produced] = []
        failures: list[str] = []
        try:
            producer.begin_transaction()
            alone, together = split_replies(outgoing)
            for out in alone:
                raw = self._codec.encode(out.name, out.record)

                def delivered(err: KafkaError | None, msg: object, out: Outgoing = out,
                              raw: bytes = raw) -> None:
                    if err is not None:
                        failures.append(str(err))
                        return
                    produced.append(Produced(
                        out.topic, msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                        out.name, out.record, raw, out.key))

                self._produce(producer, out.topic, out.key, raw, delivered)
            for replies in together:
                self._produce_together(producer, replies, produced, failures)
            committing = positions()
            # Also with nothing consumed: the group metadata is what fences a zombie.
            self._sending_offsets = (generation, time.monotonic())
            try:
                producer.send_offsets_to_transaction(committing, group, CALL_TIMEOUT)
            finally:
                if generation == self._generation:
                    self._sending_offsets = None
            producer.flush(CALL_TIMEOUT)
            if failures:
                raise KafkaException(KafkaError(KafkaError._FAIL, "; ".join(failures[:3])))
            if generation != self._generation:
                # Abandoned while stuck: nobody waits for it, and it must not commit.
                producer.abort_transaction(CALL_TIMEOUT)
                return []
            self._commit(producer)
            settled(committing)
        except KafkaException as exc:
            if generation != self._generation:
                return []
            self._recover(producer, exc)
        return produced

    def _commit(self, producer: Producer) -> None:
        # librdkafka: a retriable commit error means "call commit again"; giving up instead
        # would leave the outcome unknown.
        for _ in range(3):
            try:
                producer.commit_transaction(CALL_TIMEOUT)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                log.warning("retrying transaction commit: %s", exc)
        producer.commit_transaction(CALL_TIMEOUT)

    def _produce_together(self, producer: Producer, replies: Sequence[Outgoing],
                          produced: list[Produced], failures: list[str]) -> None:
        """Replies to one api as CommandReplies messages (infra/kafka/command_batches.py),
        each reply Produced at its message's place."""
        encoded = [(out, self._codec.encode(out.name, out.record)) for out in replies]
        for chunk in reply_chunks(encoded):
            def delivered(err: KafkaError | None, msg: object,
                          chunk: list[tuple[Outgoing, bytes]] = chunk) -> None:
                if err is not None:
                    failures.append(str(err))
                    return
                produced.extend(Produced(
                    out.topic, msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                    out.name, out.record, raw, out.key) for out, raw in chunk)

            first = chunk[0][0]
            self._produce(producer, first.topic, first.key,
                          command_replies(self._codec, [raw for _, raw in chunk]), delivered)

    @staticmethod
    def _produce(producer: Producer, topic: str, key: str, raw: bytes,
                 delivered: Callable[..., None]) -> None:
        while True:
            try:
                producer.produce(topic, value=raw, key=key.encode(), on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.05)

    def _recover(self, producer: Producer, exc: KafkaException) -> None:
        error: KafkaError = exc.args[0]
        log.warning("owner transaction failed: %s", error)
        # A fence met while producing surfaces as _FATAL ("Unable to produce message"), its
        # cause only in librdkafka's log: any fatal error asks whether a twin holds the id.
        # Taking the id back instead once let a fenced twin fence the other and go on.
        fenced = error.code() in FENCING_ERRORS or error.code() == KafkaError._FATAL \
            or error.fatal()
        if fenced and not self._replaced():
            # Fenced by the owner that took this one's partitions while it was out of the
            # group (frozen, cut off: departed_owners.py), not by another process with its
            # instance id: a new producer takes the id back and the owner resyncs.
            log.warning("owner transaction fenced by a takeover while this scheduler was "
                        "out of the group; taking its transactional id back")
            fenced = False
        if error.fatal() or error.code() in FENCING_ERRORS or not error.txn_requires_abort():
            # A fatal producer cannot be used again, and an error that does not ask for an
            # abort leaves the transaction in an unknown state: a new producer with the same
            # transactional id bumps the epoch and settles whatever the old one left open.
            # Until it does, the open transaction's offsets keep the inbox's committed
            # offsets unstable, so the new producer comes first (see fence_abandoned).
            self._producer = None
            self._must_fence = True
        else:
            try:
                producer.abort_transaction(CALL_TIMEOUT)
            except KafkaException as abort_exc:
                log.warning("abort failed: %s", abort_exc)
                self._producer = None
                self._must_fence = True
                # Fenced between the failure and its abort: by a twin with this process's
                # instance id, this process is the one to go; taking the id back would
                # fence the twin instead, which then exits though it was the newer one.
                aborted: KafkaError = abort_exc.args[0]
                if (aborted.code() in FENCING_ERRORS or aborted.fatal()) and self._replaced():
                    fenced = True
        if fenced:
            raise OwnerFenced(str(error)) from exc
        raise TransactionAborted(str(error)) from exc

    def _replaced(self) -> bool:
        """Whether another member of the group has this process's client id: a process
        started with the same instance id, which took the transactional id."""
        members = self._members(self._settings)
        if members is None:
            # Not knowing, carrying on is the safer mistake: a duplicate would fence this one
            # again (writes stay fenced by the epochs), while stopping loses a scheduler.
            return False
        mine, me = scheduler_client_id(self._settings.instance_id), self._group_member()
        return any(client == mine and member != me for client, member in members)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
