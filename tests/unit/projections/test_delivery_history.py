"""The delivery history (issue 37): each AlertDeliveryAttempted record becomes its row as
it is; what the table cannot hold, or is no delivery record, stops the batch before anything
of it is written (the loop then sets that one record aside); the combined projector routes
the records of the alert-deliveries topic to it and nothing else."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from cronlog.domain.catalogue import AlertDelivery
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.notifier.kafka_delivery_log import attempt_record
from cronlog.notifications.model import AttemptOutcome
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.delivery_history import (
    MAX_MESSAGE_CHARS,
    AlertDeliveryRow,
    DeliveryHistoryProjector,
    UnknownDeliveryRecord,
)
from cronlog.projections.history import UnstorableEvent
from tests.support import delivery_records as records

CODEC = AvroCodec()


class Rows:
    def __init__(self) -> None:
        self.rows: list[AlertDeliveryRow] = []

    def write_delivery_rows(self, rows: Sequence[AlertDeliveryRow]) -> None:
        self.rows.extend(rows)


class Batches:
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def apply_batch(self, events: Sequence[tuple[str, Any]]) -> None:
        self.batches.append([name for name, _ in events])


def decoded(record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return CODEC.decode(CODEC.encode(AlertDelivery.ATTEMPTED, record))


def test_a_record_becomes_its_row() -> None:
    store = Rows()
    retrying = records.attempt_record(outcome=AttemptOutcome.RETRYING, attempt=2)
    DeliveryHistoryProjector(store).apply_batch([decoded(attempt_record(retrying))])
    [row] = store.rows
    alert = retrying.delivery.alert
    assert (row.tenant, row.job_id, row.job_name, row.kind) == (
        "acme", str(alert.job_id), "nightly", "dead_lettered")
    assert (row.delivery_id, row.attempt, row.channel_id, row.channel_name,
            row.channel_kind) == (str(retrying.delivery.delivery_id), 2,
                                  str(retrying.delivery.channel_id), "ops-hook", "webhook")
    assert (row.outcome, row.status_code, row.latency_ms, row.error) == (
        "retrying", 503, 84, "HTTP 503")
    assert row.sent_at_us == int(retrying.sent_at.timestamp() * 1_000_000)
    assert row.next_attempt_at_us == row.sent_at_us + 30_000_000
    assert (row.run_id, row.run_attempt) == (str(alert.run_id), 3)


def test_an_alert_about_no_run_reads_empty_and_zero() -> None:
    store = Rows()
    record = {**attempt_record(records.attempt_record()), "run_id": None, "run_attempt": None,
              "message": "x" * (MAX_MESSAGE_CHARS + 10)}
    DeliveryHistoryProjector(store).apply_batch([decoded(record)])
    [row] = store.rows
    assert (row.run_id, row.run_attempt, row.next_attempt_at_us) == ("", 0, 0)
    assert len(row.message) == MAX_MESSAGE_CHARS


@pytest.mark.parametrize(("change", "field"), [
    ({"sent_at": datetime(2200, 1, 1, tzinfo=UTC)}, "sent_at"),
    ({"attempt": -1}, "attempt"),
    ({"latency_ms": -5}, "latency_ms"),
    ({"outcome": "exploded"}, "outcome"),
])
def test_what_the_table_cannot_hold_writes_nothing(change: dict[str, Any], field: str) -> None:
    store = Rows()
    good = decoded(attempt_record(records.attempt_record()))
    bad = decoded({**attempt_record(records.attempt_record(n=1)), **change})
    with pytest.raises(UnstorableEvent, match=field):
        DeliveryHistoryProjector(store).apply_batch([good, bad])
    assert store.rows == []


def test_another_record_is_refused_not_skipped() -> None:
    store = Rows()
    with pytest.raises(UnknownDeliveryRecord, match="RunSucceeded"):
        DeliveryHistoryProjector(store).apply_batch([("RunSucceeded", {})])


def test_the_combined_projector_routes_deliveries_to_their_history() -> None:
    runs, jobs, deliveries = Batches(), Batches(), Batches()
    CombinedHistoryProjector(runs, jobs, deliveries).apply_batch([
        ("RunScheduled", {}), (AlertDelivery.ATTEMPTED, {}), ("JobCreated", {}),
        ("AlertDeliveryFromTheFuture", {})])
    assert runs.batches == [["RunScheduled"]]
    assert jobs.batches == [["JobCreated"]]
    assert deliveries.batches == [["AlertDeliveryAttempted", "AlertDeliveryFromTheFuture"]]


def test_without_a_delivery_history_they_go_where_they_are_refused() -> None:
    runs, jobs = Batches(), Batches()
    CombinedHistoryProjector(runs, jobs).apply_batch([(AlertDelivery.ATTEMPTED, {})])
    assert runs.batches == [["AlertDeliveryAttempted"]]
