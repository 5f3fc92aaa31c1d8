"""Worker reports against a real broker's size limits (issue 13, item 4): a burst of large
outputs goes out in messages under the byte cap, none lost; a batch the broker refuses as
too large is split until it goes, and a report too large even alone goes without its
output; reports the broker did not take hold flush() and are sent again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not re-listed
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import consumer_config
from cronlog.infra.kafka.messages import WORKER_REPORTS, inbound, worker_reports
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.kafka.report_sink import MAX_BATCH_BYTES, KafkaReportSink
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.ports import InboundMessage
from cronlog.worker.ports import ReportsNotDelivered
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration
CODEC = AvroCodec()
AT = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)
OUTPUT = 64 * 1024


def finished(run: UUID, job: UUID, output: bytes) -> dict[str, object]:
    return {"run_id": run, "job_id": job, "attempt": 1, "worker": "w-1",
            "finished_at": AT + timedelta(microseconds=1), "outcome": "succeeded",
            "output": output, "output_truncated": False, "error": None}


class Inbox:
    """Everything on the inbox topic, read raw: message sizes and the reports they carry."""

    def __init__(self, settings: Settings) -> None:
        self._consumer = Consumer(consumer_config(settings, None))
        self._consumer.assign([TopicPartition(settings.inbox_topic, p, 0)
                               for p in range(settings.partitions)])
        self.sizes: list[int] = []
        self.reports: list[InboundMessage] = []

    def read(self) -> int:
        for message in self._consumer.consume(500, 0.5):
            decoded = inbound(message, CODEC)
            if decoded is None:
                continue
            assert decoded.name == WORKER_REPORTS
            self.sizes.append(len(decoded.raw))
            self.reports.extend(worker_reports(decoded))
        return len(self.reports)

    def close(self) -> None:
        self._consumer.close()


def inbox_ready(settings: Settings) -> None:
    """Waits until every inbox partition of the just-created topic answers for offsets. A new
    idempotent producer's first batch to a partition still electing its leader can fail
    while the next one succeeds, and librdkafka then counts the first as delivered
    (confluent-kafka-go issue 921): the topic must be ready before the burst."""
    consumer = Consumer(consumer_config(settings, None))

    def answers() -> bool:
        try:
            for p in range(settings.partitions):
                consumer.get_watermark_offsets(TopicPartition(settings.inbox_topic, p),
                                               timeout=2)
        except KafkaException:
            return False
        return True

    try:
        wait_for(answers, 30, "inbox partitions with leaders")
    finally:
        consumer.close()


def limit_inbox(settings: Settings, max_message_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, settings.inbox_topic,
                              incremental_configs=[ConfigEntry(
                                  "max.message.bytes", str(max_message_bytes),
                                  incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_a_burst_of_1000_large_outputs_reaches_the_inbox_in_messages_under_the_cap(
        isolated: Settings) -> None:
    ensure_core_topics(isolated)
    inbox_ready(isolated)
    sink = KafkaReportSink(isolated, CODEC, "w-1")
    jobs = [uuid4() for _ in range(50)]
    sent: dict[UUID, bytes] = {}
    for n in range(1000):
        run, job = uuid4(), jobs[n % len(jobs)]
        sent[run] = run.bytes * (OUTPUT // 16)
        sink.send(str(job), "AttemptFinishedReport", finished(run, job, sent[run]))
    # Gathered while a worker catches up with a burst, shipped at once: 200 such reports per
    # partition were one 12.8 MiB message the producer refused.
    sink.flush(120)
    assert sink.gathered == 0 and sink.unacknowledged == 0
    inbox = Inbox(isolated)
    try:
        wait_for(lambda: inbox.read() >= len(sent), 90, "1000 finished reports in the inbox")
        inbox.read()
    finally:
        inbox.close()
    assert sorted(r.record["run_id"] for r in inbox.reports) == sorted(sent), "lost or doubled"
    for report in inbox.reports:
        assert report.record["output"] == sent[report.record["run_id"]]
        assert not report.record["output_truncated"]
        assert report.partition == partition_for(str(report.record["job_id"]),
                                                 isolated.partitions)
    assert max(inbox.sizes) <= MAX_BATCH_BYTES
    assert len(inbox.sizes) < 1000 / 4, "reports went one per message, not batched"


def test_a_batch_the_broker_refuses_as_too_large_is_split_until_it_goes(
        isolated: Settings) -> None:
    ensure_core_topics(isolated)
    # A cluster whose limit is far below the default: 40 KiB reports fit one by one, a 64 KiB
    # one does not fit even alone.
    inbox_ready(isolated)
    limit_inbox(isolated, 50_000)
    # One message per record batch, so that the broker judges each message by itself.
    producer_settings: dict[str, Any] = {"batch.num.messages": 1}
    sink = KafkaReportSink(isolated, CODEC, "w-1", **producer_settings)
    job = uuid4()
    runs = [uuid4() for _ in range(8)]
    for run in runs:
        sink.send(str(job), "AttemptFinishedReport", finished(run, job, b"m" * 40_000))
    huge = uuid4()
    sink.send(str(job), "AttemptFinishedReport", finished(huge, job, b"h" * OUTPUT))
    sink.flush(60)
    assert sink.unacknowledged == 0
    inbox = Inbox(isolated)
    try:
        wait_for(lambda: inbox.read() >= 9, 60, "nine finished reports in the inbox")
    finally:
        inbox.close()
    assert [r.record["run_id"] for r in inbox.reports] == [*runs, huge], "order kept"
    assert all(r.record["output"] == b"m" * 40_000 for r in inbox.reports[:8])
    stripped = inbox.reports[8].record
    assert stripped["output"] == b"" and stripped["output_truncated"]
    assert stripped["outcome"] == "succeeded", "the outcome still reaches the owner"
    assert max(inbox.sizes) <= 50_000


def test_reports_the_broker_did_not_take_hold_the_flush_and_go_again(
        isolated: Settings) -> None:
    # No inbox topic yet (the broker creates none by itself): every delivery times out, as
    # while the broker is away, until the topic exists.
    producer_settings: dict[str, Any] = {"message.timeout.ms": 1500}
    sink = KafkaReportSink(isolated, CODEC, "w-1", **producer_settings)
    job, run = uuid4(), uuid4()
    sink.send(str(job), "AttemptStartedReport", {"run_id": run, "job_id": job, "attempt": 1,
                                                 "worker": "w-1", "started_at": AT})
    sink.send(str(job), "AttemptFinishedReport", finished(run, job, b"x" * 2_000))
    with pytest.raises(ReportsNotDelivered):
        sink.flush(4)
    assert sink.unacknowledged == 1, "the undelivered reports were forgotten"
    ensure_core_topics(isolated)
    wait_for(lambda: _flushed(sink), 60, "the held reports acknowledged once the topic exists")
    assert sink.unacknowledged == 0
    inbox = Inbox(isolated)
    try:
        wait_for(lambda: inbox.read() >= 1, 60, "the finish, with its start, in the inbox")
        inbox.read()
    finally:
        inbox.close()
    # Gathered together, the start goes with the finish (WorkerReports v2).
    assert [(r.name, r.record["run_id"]) for r in inbox.reports] == [
        ("AttemptFinishedReport", run)]
    assert inbox.reports[0].record["started_at"] == AT


def _flushed(sink: KafkaReportSink) -> bool:
    try:
        sink.flush(2)
    except ReportsNotDelivered:
        return False
    return True
