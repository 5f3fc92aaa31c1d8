"""KafkaOwnerTransport: the inbox consumer of a scheduler, and where each assigned
partition's owner has got to in it.

One Kafka transaction per owner cycle carries the cycle's events, dispatches and replies
together with those inbox positions (infra/kafka/owner_transaction.py); the messages read
but not decided yet are the inbox backlog's (infra/kafka/inbox_backlog.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from cronlog.commands.owner.ports import Outgoing, Produced
from cronlog.domain.catalogue import Envelope
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config, owner_session_config
from cronlog.infra.kafka.command_batches import MAX_BATCH_COMMANDS, batched_commands
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
from cronlog.infra.kafka.owner_transaction import (
    CALL_TIMEOUT,
    OwnerTransaction,
)
from cronlog.infra.kafka.ready_messages import ready_messages
from cronlog.infra.kafka.scheduler_identity import group_members, scheduler_client_id
from cronlog.infra.observability.kafka_stats import STATISTICS_INTERVAL_MS
from cronlog.ports import InboundMessage, LogUnavailable

log = logging.getLogger(__name__)

# Above TRANSACTION_DEADLINE (infra/kafka/owner_transaction.py) plus a rewind's
# CALL_TIMEOUT, with room to spare.
MAX_POLL_INTERVAL_MS = 45000
# Inbox messages read at a time: a WorkerReports message carries up to 200 reports.
INBOX_CHUNK = 20
# Most messages kept from earlier cycles handed out again a poll (the owner's memory of what
# it has read but not decided). Below it a poll also reads new messages, however many are
# kept: a command behind a busy tenant's deferred ones must reach the owner to overtake
# them (commands/owner/inbox_shares.py), not wait until the backlog is decided.
MOST_KEPT = 4000


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
        self._transaction = OwnerTransaction(settings, codec, _observed(producer_statistics),
                                             members, lambda: self.group_member)
        self._assigned: set[int] = set()
        # Where each assigned partition started: the offset to commit until one is consumed.
        self._start_offsets: dict[int, int] = {}
        self._watchdog = StalledFetchWatchdog(
            self._consumer, bounds=LogBounds(settings))
        # Partitions whose owner is still catching up, and the inbox messages read but not
        # decided yet (infra/kafka/inbox_backlog.py). Until decided, a partition's committed
        # position stays at its first kept message.
        self._backlog = InboxBacklog()

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
        read at most INBOX_CHUNK messages at a time, fewer as max_messages fills: a poll
        decodes at most about one message's worth of reports or commands more than
        max_messages. (Twenty CommandBatches of a tenant's bomb specs at once took the
        poll 100-200 ms, which every other tenant's command of the cycle waited.) Messages of held partitions
        are kept back; kept messages of released ones come first. New messages
        are read while fewer than MOST_KEPT are kept, so a command behind another tenant's
        deferred backlog is read in the next poll, not once the backlog is decided."""
        self._watchdog.check()
        result = self._backlog.take(MOST_KEPT)
        if len(result) >= MOST_KEPT:
            return result
        read = 0
        while read < max_messages:
            # Decoding is the poll's cost (a CreateJob's spec may carry a thousand excluded
            # days), so a chunk asks for no more messages than the rest of max_messages
            # could fill if each were a full CommandBatch.
            asked = max(1, min(INBOX_CHUNK, (max_messages - read) // MAX_BATCH_COMMANDS))
            # The first read waits for a message (not for a chunk to fill: infra/kafka/
            # ready_messages.py), the next ones take only what has arrived.
            messages = (self._consumer.consume(num_messages=asked, timeout=0) if result
                        else ready_messages(self._consumer, asked, timeout))
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
            if len(messages) < asked:
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

    def transact(self, outgoing: Sequence[Outgoing]) -> list[Produced]:
        """Produces outgoing and the inbox positions in one transaction, or raises
        TransactionRejected (OwnerFenced, TransactionAborted); after that the caller must
        re-read state before going on."""
        # Read on the polling thread: inside a rebalance callback the consumer answers no
        # other thread until the callback returns.
        group = self._consumer.consumer_group_metadata()
        return self._transaction.commit(outgoing, group,
                                        lambda: self._moved(self._positions()), self._settle)

    def _settle(self, committed: list[TopicPartition]) -> None:
        self._settled.update((tp.partition, tp.offset) for tp in committed)

    def rewind(self) -> None:
        """Goes back to the committed inbox offsets so unfinished input is read again."""
        self._transaction.fence_abandoned()
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
            self._transaction.close()


def _observed(on_statistics: Callable[[str], None] | None) -> dict[str, object]:
    return {} if on_statistics is None else {
        "statistics.interval.ms": STATISTICS_INTERVAL_MS, "stats_cb": on_statistics}
