"""The record of alert deliveries (issue 37) over the real servers: KafkaDeliveryLog writes
AttemptRecords to `<prefix>alert-deliveries`, the history projector's loop reads them with
its event topics and writes ClickHouse's alert_deliveries (18.16 from Debian), and a page of
them reads back per tenant, newest first, filtered, each attempt once however often it was
recorded; the same DDL and query on a current engine (chdb)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from uuid import uuid4

import pytest

from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.clickhouse.alert_deliveries import (
    DELIVERY_COLUMNS,
    LIST_DELIVERIES,
    ClickHouseAlertDeliveries,
)
from cronlog.infra.clickhouse.rejected_events import ClickHouseRejectedEvents
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, _split_statements
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_feed import KafkaEventFeed
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.notifier.kafka_delivery_log import KafkaDeliveryLog
from cronlog.infra.system_clock import SystemClock
from cronlog.notifications.model import AttemptOutcome
from cronlog.projections.combined_history import CombinedHistoryProjector
from cronlog.projections.delivery_history import DeliveryFilter, DeliveryHistoryProjector
from cronlog.projections.history import HistoryProjector
from cronlog.projections.history_loop import HistoryProjectorLoop
from cronlog.projections.job_history import JobHistoryProjector
from tests.support.chdb_engine import chdb_session
from tests.support.delivery_records import T0, attempt_record
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def history(isolated: Settings) -> Iterator[ClickHouseRunHistory]:
    store = ClickHouseRunHistory(isolated.clickhouse_host, isolated.clickhouse_port,
                                 isolated.clickhouse_database, isolated.clickhouse_user,
                                 isolated.clickhouse_password)
    store.ensure_schema()
    yield store


def _loop(settings: Settings, history: ClickHouseRunHistory) -> HistoryProjectorLoop:
    codec = AvroCodec()
    feed = KafkaEventFeed(settings, "history", [settings.job_events_topic,
                                                 settings.run_events_topic,
                                                 settings.alert_deliveries_topic], codec)
    projector = CombinedHistoryProjector(HistoryProjector(history), JobHistoryProjector(history),
                                         DeliveryHistoryProjector(
                                             ClickHouseAlertDeliveries(history)))
    rejected = ClickHouseRejectedEvents(history)
    rejected.ensure_schema()
    return HistoryProjectorLoop(feed, projector, SystemClock(), rejected, poll_timeout=0.2)


def test_recorded_attempts_reach_the_history_once_each_per_tenant(
        isolated: Settings, history: ClickHouseRunHistory) -> None:
    ensure_core_topics(isolated)
    job = uuid4()
    log = KafkaDeliveryLog(isolated, AvroCodec())
    first = attempt_record(outcome=AttemptOutcome.RETRYING, job_id=job)
    second = attempt_record(attempt=2, sent_at=T0 + timedelta(seconds=30), job_id=job)
    failed = attempt_record(n=1, to="mail", outcome=AttemptOutcome.FAILED, job_id=job,
                            sent_at=T0 + timedelta(seconds=40), channel_name="team-mail")
    other = attempt_record(tenant="globex", sent_at=T0 + timedelta(seconds=50))
    log.record([first, second, failed, other])
    log.record([second])  # recorded twice: a notifier that restarted before its commit
    deliveries = ClickHouseAlertDeliveries(history)

    loop = _loop(isolated, history)
    try:
        def all_there() -> bool:
            loop.step()
            return len(deliveries.list_deliveries(DeliveryFilter("acme"), 100, None)[0]) == 3
        wait_for(all_there, 60, "the projector writing the three attempts of acme")
    finally:
        loop.stop()
    assert loop.set_aside == 0

    rows, token = deliveries.list_deliveries(DeliveryFilter("acme"), 100, None)
    assert token is None
    assert [(r.channel_name, r.attempt, r.outcome) for r in rows] == [
        ("team-mail", 1, "failed"), ("ops-hook", 2, "delivered"), ("ops-hook", 1, "retrying")]
    assert rows[2].next_attempt_at_us == rows[2].sent_at_us + 30_000_000
    assert rows[0].error == "HTTP 410 Gone" and rows[0].status_code == 410
    [theirs] = deliveries.list_deliveries(DeliveryFilter("globex"), 100, None)[0]
    assert theirs.tenant == "globex"
    # A tenant's analysts read the same rows in their own copy (tenant_copies.py): the table
    # has a tenant column, so it is one of the copied tables.
    from cronlog.infra.clickhouse.tenant_copies import read_copies
    assert "alert_deliveries" in read_copies(history).copied_tables()


def test_pages_and_filters(history: ClickHouseRunHistory) -> None:
    deliveries = ClickHouseAlertDeliveries(history)
    job, other_job = uuid4(), uuid4()
    from cronlog.infra.notifier.kafka_delivery_log import attempt_record as fields
    from cronlog.projections.delivery_history import delivery_row
    rows = [delivery_row(fields(attempt_record(
        n=i, job_id=job if i % 2 else other_job, sent_at=T0 + timedelta(seconds=i),
        outcome=AttemptOutcome.FAILED if i % 3 == 0 else AttemptOutcome.DELIVERED,
        channel_name="a" if i < 4 else "b"))) for i in range(7)]
    deliveries.write_delivery_rows(rows)
    deliveries.write_delivery_rows(rows[:2])  # projected twice: the same rows again

    seen, token = [], None
    while True:
        page, token = deliveries.list_deliveries(DeliveryFilter("acme"), 3, token)
        seen += page
        if token is None:
            break
    assert [r.sent_at_us for r in seen] == sorted((r.sent_at_us for r in rows), reverse=True)
    by_job = deliveries.list_deliveries(DeliveryFilter("acme", job_id=str(job)), 10, None)[0]
    assert {r.job_id for r in by_job} == {str(job)} and len(by_job) == 3
    failed = deliveries.list_deliveries(DeliveryFilter("acme", outcome="failed"), 10, None)[0]
    assert [r.outcome for r in failed] == ["failed"] * 3
    on_b = deliveries.list_deliveries(DeliveryFilter("acme", channel_name="b"), 10, None)[0]
    assert len(on_b) == 3
    assert deliveries.list_deliveries(DeliveryFilter("initech"), 10, None) == ([], None)


def test_ddl_and_query_also_run_on_a_current_engine() -> None:
    from importlib.resources import files

    db = "chdb_deliveries"
    ddl = files("cronlog.infra.clickhouse").joinpath("schema.sql").read_text()
    s = chdb_session()
    for statement in _split_statements(ddl):
        s.query(statement.replace("{db}", db))
    values = ", ".join("0" if c in ("sent_at_us", "attempt", "run_attempt", "digest_count",
                                    "status_code", "latency_ms", "next_attempt_at_us")
                       else "'x'" for c in DELIVERY_COLUMNS)
    insert = (f"INSERT INTO {db}.alert_deliveries (sent_at, {', '.join(DELIVERY_COLUMNS)}) "
              f"VALUES (now(), {values})")
    s.query(insert)
    s.query(insert)
    literals = {"tenant": "'x'", "limit": "10", "job_id": "'x'", "tok_at": "5",
                "tok_delivery": "'d'", "tok_attempt": "1"}
    sql = LIST_DELIVERIES.replace("{db}", db).replace(
        "{filters}", " AND job_id = %(job_id)s AND (sent_at_us < %(tok_at)s OR "
                     "(sent_at_us = %(tok_at)s AND delivery_id < %(tok_delivery)s))")
    sql = re.sub(r"%\((\w+)\)s", lambda m: literals[m.group(1)], sql)
    assert s.query(sql, "CSV").bytes().count(b"\n") == 1, "an attempt written twice reads once"


def test_a_broker_out_of_reach_is_log_unavailable(isolated: Settings) -> None:
    from cronlog.ports import LogUnavailable

    away = isolated.with_overrides(kafka_bootstrap="127.0.0.1:1")
    log = KafkaDeliveryLog(away, AvroCodec(), within=1.0)
    with pytest.raises(LogUnavailable, match="not acknowledged within"):
        log.record([attempt_record()])
