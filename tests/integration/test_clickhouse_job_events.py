"""The console's audit timeline and top-of-hour load on the real ClickHouse (18.16) and
broker: the history projector fills job_events from the job-events topic (every job event but
JobFireAdvanced, worded as `cronlog audit` words it); the console reads it newest first, per
tenant, one row per event whatever the redeliveries; retention drops it with the history;
`cronlog replay --rebuild` fills it again from the log; the top-of-hour query counts runs by
the minute of the UTC hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from confluent_kafka import Producer

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.clickhouse.retention import HistoryRetention
from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.composition import build_history_projector, build_run_history
from cronlog.infra.config import Settings
from cronlog.infra.console.history import ClickHouseConsoleHistory
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.projections.history import HistoryProjector
from cronlog.projections.job_history import JobHistoryProjector
from cronlog.projections.job_timeline import JobEventRow
from tests.integration.test_clickhouse_analytics_and_retention import doc_queries
from tests.support.chdb_engine import chdb_session
from tests.support.cli import cronlog, set_settings_env
from tests.support.polling import wait_for
from tests.support.run_events import scheduled

pytestmark = pytest.mark.integration
Events = list[tuple[str, dict[str, object]]]


def a_paused_job(tenant: str = "acme") -> tuple[Job, Events]:
    """Created, fired twice, paused; each command's JobRequestApplied as the owner writes it."""
    now = datetime.now(UTC).replace(microsecond=0)
    job = Job.create(uuid4(), JobSpec(name="n", tenant=tenant, queue="default", handler="echo",
                                      cron="* * * * * *"), "req-create", now)

    def applied(request_id: str, command: str, at: datetime) -> tuple[str, dict[str, object]]:
        return ("JobRequestApplied", {"job_id": str(job.id), "version": job.version, "at": at,
                                      "request_id": request_id, "command": command,
                                      "request_digest": "d"})

    events: Events = [event_to_record(e) for e in job.collect_events()]
    events.append(applied("req-create", "CreateJob", now))
    job.fire(now + timedelta(seconds=1))
    job.fire(now + timedelta(seconds=2))
    job.pause("req-pause", now + timedelta(seconds=3))
    events += [event_to_record(e) for e in job.collect_events()]
    events.append(applied("req-pause", "PauseJob", now + timedelta(seconds=3)))
    return job, events


def produce(settings: Settings, job: Job, events: Events) -> None:
    codec = AvroCodec()
    producer = Producer(producer_config(settings))
    for name, record in events:
        producer.produce(settings.job_events_topic, key=str(job.id).encode(),
                         value=codec.encode(name, record),
                         partition=partition_for(str(job.id), settings.partitions))
    assert producer.flush(30) == 0


def project(settings: Settings, store: ClickHouseRunHistory, job: Job, rows: int) -> None:
    loop = build_history_projector(settings)
    try:
        wait_for(lambda: loop.step() >= 0 and len(store.job_events("acme", str(job.id))) == rows,
                 60, "the job's events in job_events")
    finally:
        loop.stop()
        loop.run_forever()  # closes the feed at once: stop is set


EXPECTED = [("JobCreated", 1, "req-create"), ("JobRequestApplied", 1, "req-create"),
            ("JobPaused", 4, "req-pause"), ("JobRequestApplied", 4, "req-pause")]


def kinds(rows: list[JobEventRow]) -> list[tuple[str, int, str]]:
    return [(r.event_type, r.version, r.request_id) for r in rows]


def test_the_projector_fills_job_events_and_the_console_reads_them_newest_first(
        isolated: Settings) -> None:
    ensure_core_topics(isolated)
    store = build_run_history(isolated)
    store.ensure_schema()
    job, events = a_paused_job()
    produce(isolated, job, events)
    project(isolated, store, job, rows=4)
    rows = store.job_events("acme", str(job.id))
    assert kinds(rows) == EXPECTED
    assert rows[0].actor == "request req-create" and rows[0].summary.startswith("next_fire_at=")
    assert rows[3].summary == "command=PauseJob"

    console = ClickHouseConsoleHistory(isolated)
    timeline = console.job_timeline("acme", str(job.id), 50)
    assert [(e.event, e.version) for e in timeline] == [
        ("JobRequestApplied", 4), ("JobPaused", 4), ("JobRequestApplied", 1), ("JobCreated", 1)]
    assert timeline[1].at == datetime.fromtimestamp(rows[2].at_us / 1e6, UTC)
    assert console.job_timeline("other", str(job.id), 50) == []
    assert len(console.job_timeline("acme", str(job.id), 2)) == 2
    # docs/analytics.md's query says the same.
    documented = next(q for q in doc_queries() if "job_events" in q)
    answer = store.execute(documented.replace("cronlog.", f"{isolated.clickhouse_database}.")
                           .replace("11111111-1111-1111-1111-111111111111", str(job.id)))
    assert [(row[2], row[1]) for row in answer] == [(e.event, e.version) for e in timeline]

    # Redelivered (a projector restarted before its commit): one line per event still, before
    # any merge collapses the copies.
    JobHistoryProjector(store).apply_batch(events)
    assert len(console.job_timeline("acme", str(job.id), 50)) == 4
    copies = store.execute(f"SELECT count() FROM {isolated.clickhouse_database}.job_events")
    assert copies[0][0] >= 4

    # Retention drops its day partitions with the rest of the history.
    dropped = HistoryRetention(store, timedelta(days=90)).run(datetime.now(UTC)
                                                              + timedelta(days=92))
    assert "job_events" in {table for table, _ in dropped}
    assert store.job_events("acme", str(job.id)) == []


def test_rebuild_fills_job_events_again_from_the_log(
        isolated: Settings, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    settings = set_settings_env(isolated, monkeypatch)
    ensure_core_topics(settings)
    store = build_run_history(settings)
    store.ensure_schema()
    job, events = a_paused_job()
    produce(settings, job, events)
    project(settings, store, job, rows=4)
    # A database from before job_events: the table is not there.
    store.execute(f"DROP TABLE {settings.clickhouse_database}.job_events")
    code, out, err = cronlog(capfd, "replay", "--rebuild")
    assert code == 0, out + err
    assert kinds(store.job_events("acme", str(job.id))) == EXPECTED
    replaced = next(line.split("database ")[1].split(":")[0] for line in out.splitlines()
                    if "kept in database" in line)
    store.execute(f"DROP DATABASE {replaced}")


def test_top_of_hour_load_counts_runs_by_minute_of_the_utc_hour(isolated: Settings) -> None:
    store = build_run_history(isolated)
    store.ensure_schema()
    projector = HistoryProjector(store)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    job = str(uuid4())
    for at in (hour, hour, hour + timedelta(hours=1), hour + timedelta(minutes=30, seconds=5)):
        projector.apply_batch(scheduled(str(uuid4()), job, at, tenant="acme"))
    # Another tenant's runs and runs before the window are not counted.
    projector.apply_batch(scheduled(str(uuid4()), job, hour, tenant="other"))
    projector.apply_batch(scheduled(str(uuid4()), job, hour - timedelta(days=2), tenant="acme"))
    load = ClickHouseConsoleHistory(isolated).top_of_hour("acme", hour - timedelta(hours=1))
    assert [(p.minute, p.runs, p.runs_per_hour) for p in load] == [(0, 3, 1.5), (30, 1, 1.0)]


def test_the_console_queries_also_run_on_a_current_engine() -> None:
    import re
    from importlib.resources import files

    from cronlog.infra.clickhouse.run_history import _split_statements
    from cronlog.infra.console.history import JOB_TIMELINE, TOP_OF_HOUR

    db = "chdb_job_events"
    s = chdb_session()
    for statement in _split_statements(
            files("cronlog.infra.clickhouse").joinpath("schema.sql").read_text()):
        s.query(statement.replace("{db}", db))
    s.query(f"INSERT INTO {db}.job_events VALUES (toDateTime(1767225600), 1767225600000000, "
            "'acme', 'j', 1, 'JobCreated', 'r', 'request r', ''), (toDateTime(1767225600), "
            "1767225600000000, 'acme', 'j', 1, 'JobCreated', 'r', 'request r', '')")
    literals = {"tenant": "'acme'", "job_id": "'j'", "limit": "50", "since": "0"}
    for query, rows in ((JOB_TIMELINE, 1), (TOP_OF_HOUR, 0)):
        sql = re.sub(r"%\((\w+)\)s", lambda m: literals[m.group(1)], query.replace("{db}", db))
        assert len(s.query(sql, "CSV").bytes().strip().splitlines()) == rows
