"""How worker reports are cut into WorkerReports messages, and what happens to one the log
did not take: plain data and arithmetic, no Kafka, so the rules are tested without a broker.

KafkaReportSink (report_sink.py) is the adapter that encodes and sends what this decides.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from cronlog.ports import Record

Kind = Literal["started", "finished"]

# Reports per WorkerReports message at most: bounds the work an owner takes on per inbox
# message it reads.
MAX_BATCH = 200
# Estimated bytes per WorkerReports message at most. The broker refuses a message above its
# `message.max.bytes` (a topic's `max.message.bytes`; both about 1 MiB by default) and the
# producer one above its own `message.max.bytes` (1,000,000 by default). Half of that leaves
# room for an estimate that runs short (it counts outputs and errors, not the Avro framing
# exactly) and for a cluster configured below the default. 200 reports with 64 KiB outputs
# (12.8 MiB) were refused whole, and those reports were lost.
MAX_BATCH_BYTES = 512 * 1024
# Encoded bytes of one report besides its output and error, rounded well up: two uuids as
# text (37 bytes each), attempt, a timestamp, outcome, flags and the array item framing come
# to about 100.
REPORT_OVERHEAD = 256
# A report that cannot go even alone (the cluster's limit is far below the default) goes
# with its output dropped (output_truncated set) and its error cut to this many characters:
# the outcome matters more than the output.
STRIPPED_ERROR_CHARS = 1024


def report_size(record: Record) -> int:
    """A cheap upper estimate of a report's encoded size: the output and error dominate."""
    size = REPORT_OVERHEAD
    output = record.get("output")
    if output is not None:
        size += len(output)
    error = record.get("error")
    if error:
        # UTF-8 takes up to 4 bytes a character; str.isascii is a flag check in CPython.
        size += len(error) if error.isascii() else 4 * len(error)
    return size


class ReportBatch:
    """One WorkerReports message's worth of reports for one inbox partition."""

    __slots__ = ("failures", "finished", "partition", "size", "started")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        # Starts by (run id, attempt), in the order they were gathered.
        self.started: dict[tuple[Any, Any], Record] = {}
        self.finished: list[Record] = []
        # Estimated bytes (report_size), not a count.
        self.size = 0
        # Deliveries of these reports that failed so far (backoff grows with it).
        self.failures = 0

    def __len__(self) -> int:
        return len(self.started) + len(self.finished)

    def add(self, kind: Kind, record: Record, size: int) -> None:
        if kind == "started":
            self.started[(record["run_id"], record["attempt"])] = record
        else:
            self.finished.append(record)
        self.size += size

    def take_start(self, record: Record) -> Record | None:
        """The start of a finished report's attempt, if it waits here unsent: taken out, for
        the finish to carry (one report instead of two, and one event at the owner)."""
        start = self.started.pop((record["run_id"], record["attempt"]), None)
        if start is not None:
            self.size -= report_size(start)
        return start

    def reports(self) -> Iterator[tuple[Kind, Record]]:
        """In the order the owner reads them: starts, then finishes."""
        for record in self.started.values():
            yield "started", record
        for record in self.finished:
            yield "finished", record


class ReportBatcher:
    """Gathers reports per inbox partition into batches capped in count and in bytes.

    Not thread-safe: its owner holds a lock around it.
    """

    def __init__(self, max_reports: int = MAX_BATCH, max_bytes: int = MAX_BATCH_BYTES) -> None:
        self._max_reports = max_reports
        self._max_bytes = max_bytes
        self._open: dict[int, ReportBatch] = {}
        # Batches that reached a cap, in the order they did; they wait for take() like the
        # rest, so a worker starting a burst of runs can put off encoding and sending.
        self._full: list[ReportBatch] = []
        self._count = 0
        # The batch, open or full, that holds each gathered start: a finish takes its start
        # from a full batch too (a worker starting a burst fills its batches with starts,
        # and they are all still unsent when the runs end).
        self._start_in: dict[tuple[Any, Any], ReportBatch] = {}

    def add(self, partition: int, kind: Kind, record: Record) -> None:
        if kind == "finished" and self._start_in:
            key = (record["run_id"], record["attempt"])
            holding = self._start_in.get(key)
            start = None
            if holding is not None and holding.partition == partition:
                del self._start_in[key]
                start = holding.take_start(record)
            if start is not None:
                record = {**record, "started_at": start["started_at"]}
                self._count -= 1
        batch = self._open.get(partition)
        size = report_size(record)
        if batch is not None and batch.size + size > self._max_bytes:
            self._full.append(batch)
            batch = None
        if batch is None:
            batch = self._open[partition] = ReportBatch(partition)
        batch.add(kind, record, size)
        if kind == "started":
            self._start_in[(record["run_id"], record["attempt"])] = batch
        self._count += 1
        if len(batch) >= self._max_reports or batch.size >= self._max_bytes:
            del self._open[partition]
            self._full.append(batch)

    def __len__(self) -> int:
        """Reports gathered and not taken yet."""
        return self._count

    def take(self) -> list[ReportBatch]:
        """Every batch gathered so far; a partition's come in the order they were gathered."""
        # A batch whose every report was a start taken by its finish has nothing to send.
        batches = [b for b in (*self._full, *self._open.values()) if len(b)]
        self._full, self._open, self._count = [], {}, 0
        self._start_in.clear()
        return batches


def split(batch: ReportBatch) -> list[ReportBatch]:
    """A batch the log refused as too large, as two halves in the same order; a single report
    as itself stripped of its output (see STRIPPED_ERROR_CHARS); nothing if even that is
    what was refused."""
    reports = list(batch.reports())
    if len(reports) > 1:
        halves = []
        for part in (reports[:len(reports) // 2], reports[len(reports) // 2:]):
            half = ReportBatch(batch.partition)
            for kind, record in part:
                half.add(kind, record, report_size(record))
            halves.append(half)
        return halves
    ((kind, record),) = reports
    if kind == "started" or _stripped(record):
        return []
    lighter: dict[str, Any] = {**record, "output": b"", "output_truncated": True}
    if record.get("error"):
        lighter["error"] = str(record["error"])[:STRIPPED_ERROR_CHARS]
    alone = ReportBatch(batch.partition)
    alone.add(kind, lighter, report_size(lighter))
    return [alone]


def _stripped(record: Record) -> bool:
    error = record.get("error")
    return (not record.get("output") and bool(record.get("output_truncated"))
            and (not error or len(error) <= STRIPPED_ERROR_CHARS))


class Redelivery:
    """Batches the log did not take, waiting to be sent again, with a bounded backoff.

    Batches of a partition with one waiting queue up behind it, so that a partition's reports
    reach the owner in the order they were gathered (a finish never before its start, as far
    as this worker can keep it). Times are monotonic seconds, passed in.
    """

    def __init__(self, first_backoff: float = 0.1, max_backoff: float = 5.0) -> None:
        self._first_backoff = first_backoff
        self._max_backoff = max_backoff
        self._waiting: list[ReportBatch] = []
        self._partitions: dict[int, int] = {}
        self._retry_at = 0.0

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def retry_at(self) -> float:
        return self._retry_at

    def holds(self, partition: int) -> bool:
        return partition in self._partitions

    def queue(self, batch: ReportBatch) -> None:
        """A batch not sent yet, behind its partition's waiting ones."""
        self._waiting.append(batch)
        self._partitions[batch.partition] = self._partitions.get(batch.partition, 0) + 1

    def failed(self, batch: ReportBatch, too_large: bool, now: float) -> list[ReportBatch]:
        """Takes back a batch whose delivery failed; returns what is given up (see split).

        Too large never gets better by waiting: the batch is split and its halves go at the
        next chance. Anything else (broker away, timeout) is retried whole after a backoff
        that doubles per failure of the batch, up to max_backoff.
        """
        if too_large:
            parts = split(batch)
            for part in parts:
                self.queue(part)
            return [] if parts else [batch]
        batch.failures += 1
        backoff = min(self._max_backoff, self._first_backoff * 2 ** (batch.failures - 1))
        self._retry_at = max(self._retry_at, now + backoff)
        self.queue(batch)
        return []

    def due(self, now: float) -> list[ReportBatch]:
        """The waiting batches, in order, once the backoff has passed; else none."""
        if not self._waiting or now < self._retry_at:
            return []
        batches, self._waiting, self._partitions = self._waiting, [], {}
        return batches
