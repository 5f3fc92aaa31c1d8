"""Worker reports cut into WorkerReports messages capped in count and bytes, and what happens
to a batch the log did not take: sent again after a bounded backoff, or split."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.kafka.report_batches import (
    MAX_BATCH,
    MAX_BATCH_BYTES,
    REPORT_OVERHEAD,
    STRIPPED_ERROR_CHARS,
    Kind,
    Redelivery,
    ReportBatch,
    ReportBatcher,
    report_size,
    split,
)
from cronlog.worker.execution import MAX_ERROR_CHARS, MAX_OUTPUT_BYTES

AT = datetime(2026, 12, 4, 3, 0, tzinfo=UTC)
CODEC = AvroCodec()


def started() -> dict[str, Any]:
    return {"run_id": uuid4(), "job_id": uuid4(), "attempt": 1, "started_at": AT}


def finished(output: bytes = b"", error: str | None = None) -> dict[str, Any]:
    return {"run_id": uuid4(), "job_id": uuid4(), "attempt": 1, "finished_at": AT,
            "outcome": "failed" if error else "succeeded", "output": output,
            "output_truncated": False, "error": error}


def encoded_size(batch: ReportBatch) -> int:
    return len(CODEC.encode("WorkerReports", {
        "worker": "worker-" + "w" * 100, "started": list(batch.started.values()),
        "finished": [{"started_at": None, **r} for r in batch.finished]}))


def batch_of(*reports: tuple[Kind, dict[str, Any]], partition: int = 0) -> ReportBatch:
    batch = ReportBatch(partition)
    for kind, record in reports:
        batch.add(kind, record, report_size(record))
    return batch


def test_the_largest_report_a_worker_makes_is_far_below_a_messages_cap() -> None:
    largest = finished(b"x" * MAX_OUTPUT_BYTES, "\u00e9" * MAX_ERROR_CHARS)
    assert report_size(largest) >= len(CODEC.encode("AttemptFinishedReport",
                                                    {**largest, "worker": "w"}))
    assert report_size(largest) * 4 <= MAX_BATCH_BYTES


def test_a_burst_of_large_outputs_is_cut_by_bytes_and_every_message_stays_under_the_cap() -> None:
    batcher = ReportBatcher()
    records = [finished(bytes([n % 256]) * MAX_OUTPUT_BYTES) for n in range(1000)]
    for record in records:
        batcher.add(3, "finished", record)
    assert len(batcher) == 1000
    batches = batcher.take()
    assert len(batcher) == 0 and batcher.take() == []
    assert [r for b in batches for r in b.finished] == records, "lost or reordered"
    for batch in batches:
        assert batch.partition == 3
        assert batch.size <= MAX_BATCH_BYTES
        assert encoded_size(batch) <= batch.size, "the estimate ran short of the encoding"
    # 64 KiB outputs: 7 fill 512 KiB with their overhead, the 8th would not fit.
    assert {len(b) for b in batches[:-1]} == {MAX_BATCH_BYTES // (MAX_OUTPUT_BYTES +
                                                                  REPORT_OVERHEAD)}


def test_small_reports_are_cut_by_count_and_keep_starts_before_finishes() -> None:
    batcher = ReportBatcher()
    for _ in range(MAX_BATCH + 10):
        batcher.add(0, "started", started())
        batcher.add(1, "finished", finished(b"ok"))
    batches = batcher.take()
    assert [(b.partition, len(b)) for b in batches] == [
        (0, MAX_BATCH), (1, MAX_BATCH), (0, 10), (1, 10)]
    assert [kind for kind, _ in batch_of(("finished", finished()), ("started", started()))
            .reports()] == ["started", "finished"]


def test_errors_count_by_their_utf8_bound() -> None:
    ascii_error, wide_error = "e" * 1000, "\u2603" * 1000
    assert report_size(finished(error=ascii_error)) == REPORT_OVERHEAD + 1000
    assert report_size(finished(error=wide_error)) == REPORT_OVERHEAD + 4000
    assert report_size(finished(error=wide_error)) >= REPORT_OVERHEAD + len(wide_error.encode())


def test_a_batch_refused_as_too_large_is_split_in_order_down_to_a_stripped_report() -> None:
    reports: list[tuple[Kind, dict[str, Any]]] = [("started", started()) for _ in range(3)]
    reports += [("finished", finished(b"o" * 1000)) for _ in range(4)]
    first, second = split(batch_of(*reports, partition=2))
    assert [*first.reports(), *second.reports()] == reports
    assert (first.partition, second.partition) == (2, 2)
    assert first.size + second.size == sum(report_size(r) for _, r in reports)

    (alone,) = split(batch_of(("finished", finished(b"o" * 1000, "E" * 5000))))
    ((kind, stripped),) = alone.reports()
    assert kind == "finished" and stripped["output"] == b"" and stripped["output_truncated"]
    assert stripped["error"] == "E" * STRIPPED_ERROR_CHARS
    assert split(alone) == [], "a stripped report refused again is given up, not retried"
    assert split(batch_of(("started", started()))) == []


def test_a_failed_batch_waits_a_doubling_bounded_backoff_and_holds_its_partition() -> None:
    redelivery = Redelivery(first_backoff=0.1, max_backoff=1.0)
    failing = batch_of(("started", started()), partition=1)
    assert redelivery.failed(failing, too_large=False, now=10.0) == []
    assert redelivery.holds(1) and not redelivery.holds(2)
    later = batch_of(("finished", finished()), partition=1)
    redelivery.queue(later)  # gathered after the failed one: must not overtake it
    assert redelivery.due(10.05) == []
    assert redelivery.due(10.1) == [failing, later]
    assert not redelivery.holds(1) and len(redelivery) == 0
    waits = []
    now = 20.0
    for _ in range(6):
        redelivery.failed(failing, too_large=False, now=now)
        waits.append(round(redelivery.retry_at - now, 3))
        now = redelivery.retry_at
        assert redelivery.due(now) == [failing]
    assert waits == [0.2, 0.4, 0.8, 1.0, 1.0, 1.0], "doubling, then bounded"


def test_a_batch_too_large_is_split_at_once_and_one_that_cannot_shrink_is_given_up() -> None:
    redelivery = Redelivery()
    big = batch_of(*[("finished", finished(b"o" * 100)) for _ in range(4)])
    assert redelivery.failed(big, too_large=True, now=5.0) == []
    halves = redelivery.due(5.0)
    assert [len(h) for h in halves] == [2, 2]
    assert [r for h in halves for _, r in h.reports()] == [r for _, r in big.reports()]
    start = batch_of(("started", started()))
    assert redelivery.failed(start, too_large=True, now=5.0) == [start]
    assert len(redelivery) == 0


@pytest.mark.parametrize("output_bytes", [0, 1000, MAX_OUTPUT_BYTES])
def test_the_estimate_is_an_upper_bound_of_the_encoding(output_bytes: int) -> None:
    batcher = ReportBatcher()
    for _ in range(MAX_BATCH):
        batcher.add(0, "started", started())
        batcher.add(0, "finished", finished(b"z" * output_bytes, "boom"))
    for batch in batcher.take():
        assert encoded_size(batch) <= batch.size <= MAX_BATCH_BYTES


def test_a_finish_carries_its_attempts_start_while_that_waits_unsent() -> None:
    batcher = ReportBatcher()
    start, other = started(), started()
    batcher.add(0, "started", start)
    batcher.add(0, "started", other)
    end = {**finished(b"ok"), "run_id": start["run_id"], "job_id": start["job_id"]}
    batcher.add(0, "finished", end)
    assert len(batcher) == 2
    (batch,) = batcher.take()
    assert [(kind, r["run_id"]) for kind, r in batch.reports()] == [
        ("started", other["run_id"]), ("finished", start["run_id"])]
    assert batch.finished[0]["started_at"] == start["started_at"]
    assert "started_at" not in end, "the worker's own record is left as it was"
    assert batch.size == report_size(other) + report_size(batch.finished[0])
    assert encoded_size(batch) <= batch.size


def test_a_finish_carries_its_start_from_a_batch_already_full() -> None:
    """A worker starting a burst fills its batches with starts; their runs end before the
    batches go, and each end still takes its start out of the full batch."""
    batcher = ReportBatcher()
    starts = [started() for _ in range(MAX_BATCH + 5)]
    for start in starts:
        batcher.add(0, "started", start)
    for start in starts:
        batcher.add(0, "finished", {**finished(b"ok"), "run_id": start["run_id"],
                                    "job_id": start["job_id"]})
    assert len(batcher) == len(starts)
    batches = batcher.take()
    assert all(len(b) and not b.started for b in batches), "a start went alone, or nothing"
    assert sum(len(b) for b in batches) == len(starts)
    carried = [r["started_at"] for b in batches for r in b.finished]
    assert carried == [s["started_at"] for s in starts]
    assert all(encoded_size(b) <= b.size for b in batches)


def test_a_finish_goes_alone_when_its_start_was_taken_or_is_of_another_attempt() -> None:
    batcher = ReportBatcher()
    start = started()
    batcher.add(0, "started", start)
    batcher.take()  # shipped: the owner gets the start on its own
    same_run = {**finished(), "run_id": start["run_id"], "job_id": start["job_id"]}
    batcher.add(0, "finished", same_run)
    batcher.add(1, "started", start)
    retry = {**finished(), "run_id": start["run_id"], "attempt": 2}
    batcher.add(1, "finished", retry)  # another attempt of the run
    batcher.add(2, "finished", {**finished(), "run_id": start["run_id"]})  # another partition
    batches = batcher.take()
    assert len(batcher) == 0 and sum(len(b) for b in batches) == 4
    assert all("started_at" not in r for b in batches for r in b.finished)
