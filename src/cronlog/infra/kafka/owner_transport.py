"""KafkaOwnerTransport: the inbox consumer and the transactional producer of a scheduler.

One Kafka transaction per owner cycle carries the cycle's events, dispatches and replies
together with the consumed inbox offsets and the consumer's group metadata (KIP-447), so a
zombie owner's commit is rejected once the group has moved its partitions elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from cronlog.commands.owner_ports import Outgoing, Produced
from cronlog.commands.ports import TransactionRejected
from cronlog.domain.catalogue import Envelope
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import (
    consumer_config,
    owner_session_config,
    transactional_producer_config,
)
from cronlog.infra.kafka.command_batches import (
    batched_commands,
    command_replies,
    reply_chunks,
    split_replies,
)
from cronlog.infra.kafka.fetch_watchdog import StalledFetchWatchdog, assign_again
from cronlog.infra.kafka.inbox_backlog import InboxBacklog
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.infra.kafka.messages import (
    WORKER_REPORTS,
    MessageDecoder,
    MessageEncoder,
    inbound_or_unreadable,
    worker_reports_or_unreadable,
)
from cronlog.infra.kafka.ready_messages import ready_messages
from cronlog.infra.kafka.scheduler_identity import (
    group_members,
    owner_transactional_id,
    scheduler_client_id,
)
from cronlog.infra.observability.kafka_stats import STATISTICS_INTERVAL_MS
from cronlog.ports import InboundMessage, LogUnavailable

log = logging.getLogger(__name__)

# Every blocking call of the owner's loop is bounded well below max.poll.interval.ms, so a
# broker restart makes the owner retry rather than hang and be dropped from the group.
CALL_TIMEOUT = 10.0
# librdkafka's send_offsets_to_transaction can block past its own timeout while the group
# coordinator is away (librdkafka issues 5456, 5511). A transaction that takes longer than
# this is abandoned: its producer is replaced, which fences it, and its outcome is unknown.
TRANSACTION_DEADLINE = 25.0
# Above TRANSACTION_DEADLINE plus a rewind's CALL_TIMEOUT, with room to spare.
MAX_POLL_INTERVAL_MS = 45000
# Inbox messages read at a time: a WorkerReports message carries up to 200 reports.
INBOX_CHUNK = 20
# Most messages kept from earlier cycles handed out again a poll (the owner's memory of what
# it has read but not decided). Below it a poll also reads new messages, however many are
# kept: a command behind a busy tenant's deferred ones must reach the owner to overtake
# them (commands/inbox_shares.py), not wait until the backlog is decided.
MOST_KEPT = 4000


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


class KafkaOwnerTransport:
    def __init__(self, settings: Settings, codec: MessageEncoder, decoder: MessageDecoder,
                 on_assign: Callable[[list[int]], None],
                 on_revoke: Callable[[list[int]], None],
                 on_hand_over: Callable[[list[int]], None] | None = None,
                 consumer_statistics: Callable[[str], None] | None = None,
                 producer_statistics: Callable[[str], None] | None = None,
                 members: Callable[[Settings], list[tuple[str, str]] | None] = group_members
                 ) -> None:
        """*_statistics: given librdkafka's statistics (JSON) of the inbox consumer and the
        transactional producer every few seconds, while they are polled. on_hand_over: told
        of partitions about to move to another member (a cooperative rebalance, not a lost
        session), before on_revoke, while this member still owns them and may still
        commit a transaction."""
        self._settings = settings
        self._members = members
        self._producer_observed = _observed(producer_statistics)
        self._codec = codec
        self._decoder = decoder
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_hand_over = on_hand_over
        # Inside a revoke callback the consumer's position may be past messages the running
        # consume call has fetched but not returned: a transaction then commits the
        # positions the last one did (settled), never the consumer's.
        self._settled: dict[int, int] = {}
        self._handing_over = False
        self._closing = False
        self._inbox = settings.inbox_topic
        self._transactional_id = owner_transactional_id(settings, settings.instance_id)
        self._consumer = Consumer(consumer_config(
            settings, f"{settings.group_prefix}-schedulers",
            **{"partition.assignment.strategy": "cooperative-sticky",
               "client.id": scheduler_client_id(settings.instance_id),
               **owner_session_config(settings),
               # Also the group's rebalance timeout: a scheduler frozen or killed while
               # the group rebalances keeps its partitions until this ends, not until the
               # session timeout (a member waiting in a join counts as alive). The longest
               # the loop goes without polling is a stuck transaction and a rewind.
               "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
               **_observed(consumer_statistics)},
        ))
        # Whether the group has given this consumer its assignment (possibly none) since it
        # joined or last lost its session: a scheduler beyond the partition count is a
        # standby, one still joining is not ready.
        self._joined = False
        self._producer: Producer | None = None
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="txn")
        # Bumped when a transaction is abandoned; its thread must not commit afterwards.
        self._generation = 0
        self._must_fence = False
        self._assigned: set[int] = set()
        # Where each assigned partition started: the offset to commit until one is consumed.
        self._start_offsets: dict[int, int] = {}
        self._watchdog = StalledFetchWatchdog(
            self._consumer, bounds=LogBounds(settings))
        # Partitions whose owner is still catching up, and the inbox messages read but not
        # decided yet (infra/kafka/inbox_backlog.py). Until decided, a partition's committed
        # position stays at its first kept message.
        self._backlog = InboxBacklog()

    def _new_producer(self) -> Producer:
        producer = Producer({**transactional_producer_config(self._settings,
                                                             self._transactional_id),
                             **self._producer_observed})
        producer.init_transactions(CALL_TIMEOUT)
        return producer

    def start(self) -> None:
        self._consumer.subscribe([self._inbox], on_assign=self._assigned_cb,
                                 on_revoke=self._revoked_cb, on_lost=self._lost_cb)

    def _assigned_cb(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._joined = True
        numbers = sorted(tp.partition for tp in partitions)
        self._assigned.update(numbers)
        if numbers:
            try:
                committed = self._consumer.committed(
                    [TopicPartition(self._inbox, p) for p in numbers], timeout=CALL_TIMEOUT)
                for tp in committed:
                    self._start_offsets[tp.partition] = max(tp.offset, 0)
            except KafkaException as exc:
                log.warning("committed offsets of %s unknown: %s", numbers, exc)
            self._on_assign(numbers)

    def _revoked_cb(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        numbers = self._unassign(partitions)
        if numbers and self._on_hand_over is not None and not self._closing:
            self._handing_over = True
            try:
                self._on_hand_over(numbers)
            finally:
                self._handing_over = False
        if numbers:
            self._on_revoke(numbers)

    def _lost_cb(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Lost, not revoked: another member may own them already; nothing more is written.
        self._joined = False
        numbers = self._unassign(partitions)
        if numbers:
            self._on_revoke(numbers)

    def _unassign(self, partitions: list[TopicPartition]) -> list[int]:
        numbers = sorted(tp.partition for tp in partitions)
        # Out of the positions before any hand-over transaction: what of theirs was
        # fetched but not handled is for the next owner to read.
        self._assigned.difference_update(numbers)
        self._backlog.forget(numbers)
        for number in numbers:
            self._settled.pop(number, None)
        return numbers

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(self._assigned)

    @property
    def joined(self) -> bool:
        return self._joined

    @property
    def group_member(self) -> str:
        """The member id the group coordinator gave this consumer (set before any
        assignment callback runs)."""
        return self._consumer.memberid() or ""

    def hold(self, partitions: Sequence[int]) -> None:
        self._backlog.hold(partitions)

    def release(self, partitions: Sequence[int]) -> None:
        self._backlog.release(partitions)

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        """The messages kept from earlier cycles (up to MOST_KEPT), then about max_messages
        new commands and reports. A WorkerReports message counts as the reports it carries,
        a CommandBatch as its commands (infra/kafka/command_batches.py), so the inbox is
        read INBOX_CHUNK messages at a time: a poll takes at most INBOX_CHUNK messages'
        worth of reports or commands more than max_messages. Messages of held partitions
        are kept back; kept messages of released ones come first. New messages
        are read while fewer than MOST_KEPT are kept, so a command behind another tenant's
        deferred backlog is read in the next poll, not once the backlog is decided."""
        self._watchdog.check()
        result = self._backlog.take(MOST_KEPT)
        if len(result) >= MOST_KEPT:
            return result
        read = 0
        while read < max_messages:
            # The first read waits for a message (not for a chunk to fill: infra/kafka/
            # ready_messages.py), the next ones take only what has arrived.
            messages = (self._consumer.consume(num_messages=INBOX_CHUNK, timeout=0) if result
                        else ready_messages(self._consumer, INBOX_CHUNK, timeout))
            for message in messages:
                decoded = inbound_or_unreadable(message, self._decoder)
                if decoded is None:
                    continue
                if decoded.name == WORKER_REPORTS:
                    reports = worker_reports_or_unreadable(decoded)
                elif decoded.name == Envelope.COMMAND_BATCH:
                    reports = batched_commands(decoded, self._decoder)
                else:
                    reports = [decoded]
                read += len(reports)
                if self._backlog.keeps(decoded.partition):
                    self._backlog.keep(decoded.partition, reports)
                else:
                    result.extend(reports)
            if len(messages) < INBOX_CHUNK:
                break
        return result

    def put_back(self, messages: Sequence[InboundMessage]) -> None:
        """Messages of the last poll the owner did not decide (its cycle's budget was spent),
        in the order polled: kept in front of anything kept since, so the next poll hands
        them out first and each partition stays in order; until then _positions commits
        each partition's position at the first of them, so a crash reads them again. Reports
        of one WorkerReports message (commands of one CommandBatch) share its offset and
        stay one kept entry (the owner
        stops only between whole Kafka messages). Those of partitions no longer assigned
        are dropped: their next owner reads them from the committed position."""
        self._backlog.put_back(messages, self._assigned)

    def _positions(self) -> list[TopicPartition]:
        """Where each assigned partition's owner has got to: the next message not handed
        to it (a kept one), else the consumer's position, else where it started."""
        if self._handing_over:
            return [TopicPartition(self._inbox, p,
                                   self._settled.get(p, self._start_offsets.get(p, 0)))
                    for p in sorted(self._assigned)]
        positions = []
        for tp in self._consumer.position(
                [TopicPartition(self._inbox, p) for p in sorted(self._assigned)]):
            kept = self._backlog.first_offset(tp.partition)
            if kept is not None:
                tp = TopicPartition(self._inbox, tp.partition, kept)
            elif tp.offset < 0:
                tp = TopicPartition(self._inbox, tp.partition,
                                    self._start_offsets.get(tp.partition, 0))
            positions.append(tp)
        return positions

    def _moved(self, positions: list[TopicPartition]) -> list[TopicPartition]:
        """The positions that differ from what the last transaction committed, or the
        first one when none does: an owner of 512 partitions whose cycle read a few of them
        commits those few, not 512 offsets a cycle."""
        moved = [tp for tp in positions if self._settled.get(tp.partition) != tp.offset]
        return moved or positions[:1]

    def _ready_producer(self) -> Producer:
        if self._producer is None:
            try:
                self._producer = self._new_producer()
            except KafkaException as exc:
                raise TransactionAborted(f"transactional producer not ready: {exc}") from exc
        return self._producer

    def transact(self, outgoing: Sequence[Outgoing]) -> list[Produced]:
        """Produces outgoing and the inbox positions in one transaction, or raises
        TransactionRejected; after that the caller must re-read state before going on."""
        producer = self._ready_producer()
        generation = self._generation
        # Read on the polling thread: inside a rebalance callback the consumer answers no
        # other thread until the callback returns.
        group = self._consumer.consumer_group_metadata()
        future = self._runner.submit(self._transact, producer, outgoing, generation, group)
        try:
            return future.result(timeout=TRANSACTION_DEADLINE)
        except FutureTimeout:
            log.error("owner transaction stuck for %.0fs; replacing the producer",
                      TRANSACTION_DEADLINE)
            self._generation += 1
            self._producer = None
            self._must_fence = True
            # The stuck thread keeps its thread; later transactions get a fresh one.
            self._runner.shutdown(wait=False)
            self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="txn")
            raise TransactionAborted("transaction stuck; outcome unknown") from None

    def _transact(self, producer: Producer, outgoing: Sequence[Outgoing],
                  generation: int, group: object) -> list[Produced]:
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
            positions = self._moved(self._positions())
            # Also with nothing consumed: the group metadata is what fences a zombie.
            producer.send_offsets_to_transaction(positions, group, CALL_TIMEOUT)
            producer.flush(CALL_TIMEOUT)
            if failures:
                raise KafkaException(KafkaError(KafkaError._FAIL, "; ".join(failures[:3])))
            if generation != self._generation:
                # Abandoned while stuck: nobody waits for it, and it must not commit.
                producer.abort_transaction(CALL_TIMEOUT)
                return []
            self._commit(producer)
            self._settled.update((tp.partition, tp.offset) for tp in positions)
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
        fenced = error.code() in FENCING_ERRORS
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
            # offsets unstable, so the new producer comes first (see rewind).
            self._producer = None
            self._must_fence = True
        else:
            try:
                producer.abort_transaction(CALL_TIMEOUT)
            except KafkaException as abort_exc:
                log.warning("abort failed: %s", abort_exc)
                self._producer = None
                self._must_fence = True
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
        mine, me = scheduler_client_id(self._settings.instance_id), self.group_member
        return any(client == mine and member != me for client, member in members)

    def rewind(self) -> None:
        """Goes back to the committed inbox offsets so unfinished input is read again."""
        if self._must_fence:
            # An abandoned transaction must be fenced before anyone reads what it left.
            self._ready_producer()
            self._must_fence = False
        # What was kept is read again from the committed offsets.
        self._backlog.clear_kept()
        if not self._assigned:
            return
        try:
            committed = self._consumer.committed(
                [TopicPartition(self._inbox, p) for p in sorted(self._assigned)], timeout=CALL_TIMEOUT)
        except KafkaException as exc:
            raise LogUnavailable(f"committed inbox offsets: {exc}") from exc
        failed: list[str] = []
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else self._start_offsets.get(tp.partition, 0)
            self._start_offsets[tp.partition] = offset
            self._settled[tp.partition] = offset
            try:
                self._consumer.seek(TopicPartition(self._inbox, tp.partition, offset))
            except KafkaException as exc:
                # librdkafka refuses a seek while a partition is not fetching. One way there:
                # its committed offset was asked of a coordinator that had moved, and the
                # partition then waits for an answer that never comes (librdkafka issue
                # 5586). Assigning it again at an explicit offset needs no such answer.
                log.warning("seek %s@%d failed (%s); assigning it again", tp.partition,
                            offset, exc)
                try:
                    assign_again(self._consumer, [TopicPartition(self._inbox, tp.partition,
                                                                 offset)])
                except KafkaException as again:
                    failed.append(f"{tp.partition}@{offset}: {again}")
        if failed:
            # Going on from where the consumer is would skip the input of the cycle that was
            # not committed: its reports and commands would never be applied.
            raise LogUnavailable(f"cannot rewind inbox partitions {', '.join(failed)}")

    def close(self) -> None:
        # Leaving revokes every partition; a scheduler that leaves on purpose has handed
        # them over already (PartitionOwner.hand_over).
        self._closing = True
        try:
            self._consumer.close()
        finally:
            if self._producer is not None:
                self._producer.flush(10)


def _observed(on_statistics: Callable[[str], None] | None) -> dict[str, object]:
    return {} if on_statistics is None else {
        "statistics.interval.ms": STATISTICS_INTERVAL_MS, "stats_cb": on_statistics}
