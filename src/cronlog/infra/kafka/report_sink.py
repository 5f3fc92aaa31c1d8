"""KafkaReportSink: sends worker reports to the inbox, on the partition of their job.

Start and finish reports are gathered per inbox partition and shipped as one WorkerReports
message each time the worker's loop comes round (and before every flush): at thousands of
runs a second a message per report was most of the worker's Kafka work, and most of the
owner's. Heartbeats and anything else go one message each, at once.
"""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import KafkaException, Producer

from cronlog.commands.ports import Record, ReportsNotDelivered
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.messages import MessageEncoder
from cronlog.infra.kafka.partitioner import partition_for

# Report names gathered into WorkerReports, and the list each goes into.
GATHERED = {"AttemptStartedReport": "started", "AttemptFinishedReport": "finished"}
# Reports per WorkerReports message at most: bounds a message's size and the work an owner
# takes on per inbox message it reads.
MAX_BATCH = 200
# Jobs whose report partition is remembered, at most (~100 bytes each): more than a worker
# holds dispatches for in a 100,000-run burst. Beyond it the memory starts over, and a
# partition is worked out again when needed.
PARTITIONS_REMEMBERED = 200_000


class _Batch:
    __slots__ = ("finished", "size", "started")

    def __init__(self) -> None:
        self.started: list[Record] = []
        self.finished: list[Record] = []
        self.size = 0


def _without_worker(record: Record) -> dict[str, Any]:
    # WorkerReports names its worker once.
    return {k: v for k, v in record.items() if k != "worker"}


class KafkaReportSink:
    def __init__(self, settings: Settings, encoder: MessageEncoder, worker: str) -> None:
        self._topic = settings.inbox_topic
        self._partitions = settings.partitions
        self._encoder = encoder
        self._worker = worker
        # A worker sends several reports per run: only failed deliveries call back.
        self._producer = Producer(producer_config(settings, **{"delivery.report.only.error": True}))
        self._failures: list[str] = []
        # Handler threads report finishes while the worker's loop reports starts.
        self._lock = threading.Lock()
        self._batches: dict[int, _Batch] = {}
        # Batches that reached MAX_BATCH, in the order they did, waiting for ship(): sending
        # (and encoding) happens there, so a worker starting a burst of runs can put it off.
        self._full: list[tuple[int, _Batch]] = []
        self._partition_of: dict[str, int] = {}

    def _delivered(self, err: object, _msg: object) -> None:
        if err is not None:
            self._failures.append(str(err))

    def send(self, key: str, name: str, record: Record) -> None:
        kind = GATHERED.get(name)
        if kind is None:
            self._produce(self._encoder.encode(name, record), key, None)
            return
        partition = self._partition(key)
        with self._lock:
            batch = self._batches.get(partition)
            if batch is None:
                batch = self._batches[partition] = _Batch()
            (batch.started if kind == "started" else batch.finished).append(record)
            batch.size += 1
            if batch.size >= MAX_BATCH:
                del self._batches[partition]
                self._full.append((partition, batch))

    @property
    def gathered(self) -> int:
        """Reports gathered and not shipped yet."""
        with self._lock:
            return (sum(batch.size for _, batch in self._full)
                    + sum(batch.size for batch in self._batches.values()))

    def ship(self) -> None:
        """Sends the reports gathered so far."""
        # Under the lock: a partition's batches must reach the producer in the order they
        # were gathered (full ones first), or a finish could overtake its start.
        with self._lock:
            full, self._full = self._full, []
            batches, self._batches = self._batches, {}
            for partition, batch in [*full, *batches.items()]:
                self._ship(partition, batch)

    def _ship(self, partition: int, batch: _Batch) -> None:
        value = self._encoder.encode("WorkerReports", {
            "worker": self._worker, "started": [_without_worker(r) for r in batch.started],
            "finished": [_without_worker(r) for r in batch.finished]})
        self._produce(value, None, partition)

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

    def _produce(self, value: bytes, key: str | None, partition: int | None) -> None:
        extra: dict[str, Any] = {"key": key.encode()} if key is not None else {
            "partition": partition}
        while True:
            try:
                self._producer.produce(self._topic, value=value, on_delivery=self._delivered,
                                       **extra)
                break
            except BufferError:
                self._producer.poll(0.1)
        self._producer.poll(0)

    def flush(self, timeout: float) -> None:
        self.ship()
        try:
            remaining = self._producer.flush(timeout)
        except KafkaException as exc:
            raise ReportsNotDelivered(str(exc)) from exc
        if remaining or self._failures:
            failures, self._failures = self._failures, []
            raise ReportsNotDelivered(
                f"{remaining} reports still queued; failures: {failures[:3]}")
