"""KafkaReportSink: sends worker reports to the inbox, on the partition of their job.

Start and finish reports are gathered per inbox partition and shipped as WorkerReports
messages each time the worker's loop comes round (and before every flush): at thousands of
runs a second a message per report was most of the worker's Kafka work, and most of the
owner's. A message holds at most MAX_BATCH reports and about MAX_BATCH_BYTES
(report_batches.py). Heartbeats and anything else go one message each, at once.

A WorkerReports message stays the sink's until the broker acknowledges it: one that fails
(broker away past the producer's own retries, timeout) is sent again after a bounded
backoff, one refused as too large is split, and flush() raises ReportsNotDelivered until
every report is acknowledged, so the worker does not commit the dispatches they settle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from cronlog.domain.catalogue import Report
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.messages import MessageEncoder
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.kafka.report_batches import (
    MAX_BATCH,
    MAX_BATCH_BYTES,
    Kind,
    Redelivery,
    ReportBatch,
    ReportBatcher,
)
from cronlog.log_fields import log_fields
from cronlog.ports import Record
from cronlog.worker.ports import ReportsNotDelivered

__all__ = ["MAX_BATCH", "MAX_BATCH_BYTES", "KafkaReportSink"]

log = logging.getLogger(__name__)

# Report names gathered into WorkerReports, and the list each goes into.
GATHERED: dict[str, Kind] = {Report.ATTEMPT_STARTED: "started",
                             Report.ATTEMPT_FINISHED: "finished"}
# Jobs whose report partition is remembered, at most (~100 bytes each): more than a worker
# holds dispatches for in a 100,000-run burst. Beyond it the memory starts over, and a
# partition is worked out again when needed.
PARTITIONS_REMEMBERED = 200_000
# What the producer or the broker answers for a message above its size limit: waiting does
# not help, splitting does.
TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})
# A flush slower than this is logged: the worker's loop starts nothing while it waits.
SLOW_FLUSH = 1.0


def _without_worker(record: Record) -> dict[str, Any]:
    # WorkerReports names its worker once.
    return {k: v for k, v in record.items() if k != "worker"}


def _finished_item(record: Record) -> dict[str, Any]:
    item = _without_worker(record)
    # Set when the batch held the attempt's start, which this report then stands for.
    item.setdefault("started_at", None)
    return item


class KafkaReportSink:
    def __init__(self, settings: Settings, encoder: MessageEncoder, worker: str,
                 on_given_up: Callable[[int], None] | None = None,
                 **producer_settings: Any) -> None:
        """producer_settings: librdkafka settings over cronlog's (tests shorten timeouts).
        on_given_up: told how many reports were dropped as undeliverable."""
        self._on_given_up = on_given_up
        self._topic = settings.inbox_topic
        # The inbox has the layout's K Kafka partitions.
        self._partitions = settings.layout.kafka
        self._encoder = encoder
        self._worker = worker
        self._producer = Producer(producer_config(settings, **{
            # The broker's size limit applies to a record batch, which may carry several
            # WorkerReports messages of a partition: a record batch stays under the same cap.
            "batch.size": MAX_BATCH_BYTES, **producer_settings}))
        # Handler threads report finishes while the worker's loop reports starts.
        self._lock = threading.Lock()
        self._batcher = ReportBatcher()
        self._partition_of: dict[str, int] = {}
        # What is sent and not acknowledged, and what waits to be sent again: touched by the
        # thread that ships and flushes, and by the delivery callbacks, which librdkafka runs
        # inside that thread's poll and flush.
        self._sending = threading.RLock()
        self._in_flight: dict[int, ReportBatch] = {}
        self._sent = 0
        self._redelivery = Redelivery()
        self._last_failure = ""

    def send(self, key: str, name: str, record: Record) -> None:
        kind = GATHERED.get(name)
        if kind is None:
            self._produce_single(self._encoder.encode(name, record), key, name)
            return
        partition = self._partition(key)
        with self._lock:
            self._batcher.add(partition, kind, record)

    @property
    def gathered(self) -> int:
        """Reports gathered and not shipped yet."""
        with self._lock:
            return len(self._batcher)

    @property
    def unacknowledged(self) -> int:
        """WorkerReports messages sent and not acknowledged, or waiting to be sent again."""
        with self._sending:
            return len(self._in_flight) + len(self._redelivery)

    def ship(self) -> None:
        """Sends the reports gathered so far, after those waiting to be sent again."""
        # One thread ships at a time: a partition's batches must reach the producer in the
        # order they were gathered (full ones first), or a finish could overtake its start.
        with self._sending:
            with self._lock:
                batches = self._batcher.take()
            for batch in self._redelivery.due(time.monotonic()):
                self._ship(batch)
            for batch in batches:
                if self._redelivery.holds(batch.partition):
                    self._redelivery.queue(batch)
                else:
                    self._ship(batch)
            if self._in_flight and not batches:
                # Acknowledgements are only heard in a poll: without one an idle worker's
                # last reports looked unacknowledged (cronlog_worker_reports_pending) until
                # its next commit, and a failed one waited that long to go again.
                self._producer.poll(0)

    def _ship(self, batch: ReportBatch) -> None:
        value = self._encoder.encode(Report.WORKER_REPORTS, {
            "worker": self._worker,
            "started": [_without_worker(r) for r in batch.started.values()],
            "finished": [_finished_item(r) for r in batch.finished]})
        self._sent += 1
        number = self._sent
        self._in_flight[number] = batch
        try:
            self._produce(value, on_delivery=self._on_batch_delivery(number),
                          partition=batch.partition)
        except KafkaException as exc:
            # Refused before it left (e.g. above the producer's own message.max.bytes).
            del self._in_flight[number]
            self._failed(batch, exc.args[0])

    def _on_batch_delivery(self, number: int) -> Callable[[KafkaError | None, object], None]:
        def delivered(err: KafkaError | None, _msg: object) -> None:
            with self._sending:
                batch = self._in_flight.pop(number, None)
                if err is not None and batch is not None:
                    self._failed(batch, err)
        return delivered

    def _failed(self, batch: ReportBatch, err: KafkaError) -> None:
        self._last_failure = str(err)
        too_large = err.code() in TOO_LARGE
        given_up = self._redelivery.failed(batch, too_large, time.monotonic())
        if given_up:
            if self._on_given_up is not None:
                self._on_given_up(len(batch))
            log.error("a %s report to partition %d is too large to send even without its "
                      "output (%s): dropped, its attempt will be lost by its heartbeat "
                      "deadline", next(iter(batch.reports()))[0], batch.partition, err)
        elif too_large:
            log.warning("%d reports to partition %d refused as too large (%s): split",
                        len(batch), batch.partition, err)
        else:
            log.warning("%d reports to partition %d not delivered (%s): will send them "
                        "again", len(batch), batch.partition, err)

    def _produce_single(self, value: bytes, key: str, name: str) -> None:
        def delivered(err: KafkaError | None, _msg: object) -> None:
            # A heartbeat is sent again within the heartbeat interval anyway.
            if err is not None:
                log.warning("%s for %s not delivered: %s", name, key, err,
                            extra=log_fields(job_id=key))
        try:
            self._produce(value, on_delivery=delivered, key=key.encode())
        except KafkaException as exc:
            log.warning("%s for %s not sent: %s", name, key, exc, extra=log_fields(job_id=key))

    def prepare(self, key: str) -> None:
        # murmur2 in Python was a third of a start's cost in a burst: worked out when the
        # dispatch arrives instead.
        self._partition(key)

    def _partition(self, key: str) -> int:
        partition = self._partition_of.get(key)
        if partition is None:
            if len(self._partition_of) >= PARTITIONS_REMEMBERED:
                self._partition_of.clear()
            # The partition the producer's murmur2 partitioner would give the job's key:
            # the owner of the job's partition must get its reports.
            partition = self._partition_of[key] = partition_for(key, self._partitions)
        return partition

    def _produce(self, value: bytes, **where: Any) -> None:
        while True:
            try:
                self._producer.produce(self._topic, value=value, **where)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def flush(self, timeout: float) -> None:
        """Returns once every report sent so far is acknowledged by the log; raises
        ReportsNotDelivered if that takes longer than timeout seconds (the reports stay
        here and go again)."""
        began = time.monotonic()
        deadline = began + timeout
        self.ship()
        while True:
            try:
                queued = self._producer.flush(max(0.0, deadline - time.monotonic()))
            except KafkaException as exc:
                raise ReportsNotDelivered(str(exc)) from exc
            now = time.monotonic()
            with self._sending:
                waiting, in_flight = len(self._redelivery), len(self._in_flight)
                retry_at = self._redelivery.retry_at
                if not waiting and not in_flight and not queued:
                    if now - began > SLOW_FLUSH:
                        # The worker's loop waits for this before it commits.
                        log.warning("reports acknowledged after %.1fs", now - began)
                    return
            if now >= deadline or retry_at >= deadline:
                raise ReportsNotDelivered(
                    f"{in_flight} report messages unacknowledged, {waiting} waiting to be "
                    f"sent again, {queued} messages still queued; last failure: "
                    f"{self._last_failure or 'none'}")
            if waiting:
                # The backoff, spent serving delivery callbacks of what is in flight.
                self._producer.poll(max(0.0, retry_at - now))
                self.ship()
