"""KafkaOwnerTransport against a real broker: when a second scheduler joins, the first is told
which partitions are about to move while it still owns them, and a transaction it commits
then lands; the inbox positions it commits meanwhile are the last settled ones, so no
message fetched but not handed to the owner is skipped by anyone."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.owner_transport import KafkaOwnerTransport
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.ports import InboundMessage
from tests.support.owner_kafka import committed
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def created_events(settings: Settings) -> list[Outgoing]:
    job = Job.create(uuid4(), JobSpec(name="handed", tenant="t", queue="q", handler="echo",
                                      cron="0 * * * *"), "req", T0)
    return [Outgoing(settings.job_events_topic, str(job.id), *event_to_record(e))
            for e in job.collect_events()]


def committed_job_events(settings: Settings) -> int:
    consumer = Consumer(consumer_config(settings, None))
    try:
        total = 0
        for partition in range(settings.partitions):
            low, high = consumer.get_watermark_offsets(
                TopicPartition(settings.job_events_topic, partition), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def test_a_joining_scheduler_lets_the_owner_commit_its_hand_over_and_skips_no_message(
        isolated: Settings) -> None:
    ensure_core_topics(isolated)
    codec = AvroCodec()
    handed: list[list[int]] = []
    revoked: list[int] = []
    first_assigned: list[int] = []
    landed: list[int] = []
    first: KafkaOwnerTransport

    kept_committed: dict[int, int] = {}

    def hand_over(partitions: list[int]) -> None:
        handed.append(partitions)
        landed.extend(p.partition for p in first.transact(created_events(isolated)))
        kept_committed.update({p: committed(isolated, p) for p in range(isolated.partitions)
                               if p not in partitions})

    first = KafkaOwnerTransport(isolated, codec, codec, on_assign=first_assigned.extend,
                                on_revoke=revoked.extend, on_hand_over=hand_over)
    second_assigned: list[int] = []
    second = KafkaOwnerTransport(isolated.with_overrides(instance_id=f"second-{uuid4().hex}"),
                                 codec, codec, on_assign=second_assigned.extend,
                                 on_revoke=lambda ps: None)
    seen: list[InboundMessage] = []
    producer = Producer({"bootstrap.servers": isolated.kafka_bootstrap})

    def send(round_: int) -> None:
        for partition in range(isolated.partitions):
            # Bytes that do not decode come out as UNREADABLE messages: enough here.
            producer.produce(isolated.inbox_topic, value=f"junk-{round_}-{partition}".encode(),
                             partition=partition)
        producer.flush(30)

    try:
        first.start()

        def first_polled_assigned() -> list[int]:
            seen.extend(first.poll(0.2, 100))
            return first_assigned

        wait_for(first_polled_assigned, 30, "the first scheduler's assignment")
        send(1)

        def first_round_handled() -> bool:
            seen.extend(first.poll(0.2, 100))
            return len(seen) >= isolated.partitions

        wait_for(first_round_handled, 30, "the first round, handled")
        first.transact([])  # settled: every first-round message handled and committed
        # The second round is in the inbox as the group rebalances: some of it may be
        # fetched by the first scheduler's consumer during the callback, not handed over.
        send(2)
        second.start()

        def both_polled() -> bool:
            seen.extend(first.poll(0.1, 100))
            seen.extend(second.poll(0.1, 100))
            return bool(second_assigned) and bool(handed)

        wait_for(both_polled, 60, "the second scheduler's assignment and the hand-over")
        moved = handed[0]
        assert sorted(moved) == sorted(revoked[:len(moved)]), "told before the revoke"
        assert landed, "the hand-over's transaction committed while it still owned them"
        # The partitions that stay committed where the last transaction left them: the
        # first round, handled. Second-round messages handed out since, or fetched by the
        # consume call that ran the callback, are not committed by the hand-over.
        assert kept_committed and set(kept_committed.values()) == {1}, kept_committed
        wait_for(lambda: committed_job_events(isolated) >= len(landed), 30,
                 "the hand-over's events, committed")

        def every_second_round_message_seen() -> bool:
            seen.extend(first.poll(0.1, 100))
            seen.extend(second.poll(0.1, 100))
            return {m.partition for m in seen if m.offset == 1} == set(
                range(isolated.partitions))

        wait_for(every_second_round_message_seen, 60,
                 "each partition's second-round message, by its owner then")
        first.transact([])
        second.transact([])
    finally:
        first.close()
        second.close()
