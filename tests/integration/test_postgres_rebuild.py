"""Postgres is a projection (issue 15, item 5): an owner started on an empty database
rebuilds every partition's state from the Kafka log — jobs, the due index, runs not yet
ended, request ids with their digests — equal to what the lost database held, and answers a
retried request as the first time. Real Kafka and Postgres, the owner in-process."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from cronlog.commands.api.job_api import CommandRejected, JobApi
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.domain.catalogue import Command, Report
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.composition import build_scheduler
from cronlog.infra.config import Settings
from cronlog.infra.declared_queues import declared_queues
from cronlog.infra.grpc.server import SpecRecords
from cronlog.infra.kafka.command_channel import KafkaCommandChannel
from cronlog.infra.kafka.report_sink import KafkaReportSink
from cronlog.infra.postgres.connection import ensure_schema
from cronlog.infra.postgres.job_queries import PostgresJobQueries
from cronlog.infra.provision import provision
from cronlog.infra.system_clock import SystemClock
from tests.support.owner_kafka import catch_up, owning_transport
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration

TENANT = "rebuild"
# Everything the owner keeps in Postgres, as rows to compare (partition_owners' epochs and
# owners are per database by design; its applied offsets are compared).
STATE = {
    "jobs": "SELECT * FROM jobs ORDER BY job_id",
    "runs": "SELECT * FROM runs ORDER BY run_id",
    "requests": "SELECT * FROM requests ORDER BY job_id, request_id",
    "offsets": ("SELECT partition, job_events_offset, run_events_offset "
                "FROM partition_owners ORDER BY partition"),
}


@contextmanager
def owner_running(settings: Settings) -> Iterator[PartitionOwner]:
    """A scheduler's owner cycling in a thread until the block ends."""
    owner, transport = build_scheduler(settings)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            owner.cycle()

    thread = threading.Thread(target=loop, name="owner", daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(owner.epochs) == settings.partitions, 60,
                 "the owner caught up on every partition")
        yield owner
    finally:
        stop.set()
        thread.join(30)
        transport.close()  # type: ignore[attr-defined]


@contextmanager
def api_of(settings: Settings) -> Iterator[JobApi]:
    codec = AvroCodec()
    channel = KafkaCommandChannel(settings, codec, codec)
    channel.start()
    jobs = PostgresJobQueries(settings.postgres_dsn)
    try:
        yield JobApi(bus=channel, jobs=jobs, queues=declared_queues(settings),
                     specs=SpecRecords(), clock=SystemClock(), reply_timeout=30)
    finally:
        channel.close()
        jobs.close()


def snapshot(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        return {what: conn.execute(query).fetchall()
                for what, query in STATE.items()}


def epochs(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [int(e) for (e,) in conn.execute(
            "SELECT epoch FROM partition_owners ORDER BY partition").fetchall()]


def empty_database(settings: Settings) -> Settings:
    """A new, empty database on the same server: what an operator creates after a loss."""
    tag = "r" + uuid.uuid4().hex[:10]
    server = settings.postgres_dsn.rsplit("/", 1)[0]
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{tag}"')
    rebuilt = settings.with_overrides(postgres_dsn=f"{server}/{tag}",
                                      instance_id=f"{settings.instance_id}-rebuilt")
    ensure_schema(rebuilt.postgres_dsn, rebuilt.partitions)
    return rebuilt


def spec(name: str, **fields: Any) -> JobSpec:
    return JobSpec(name=name, tenant=TENANT, queue="default", handler="echo",
                   heartbeat_timeout=timedelta(minutes=10), **fields)


def build_state(settings: Settings, api: JobApi) -> dict[str, Any]:
    """Jobs in every state the owner keeps, runs in flight (dispatched and running), and
    request ids: all through the owner. Nothing is due once it is done."""
    now = datetime.now(UTC).replace(microsecond=0)
    firing = api.create_job("create-firing", spec(
        "firing", cron="* * * * * *", start_at=now + timedelta(seconds=2),
        end_at=now + timedelta(seconds=4)))
    yearly = api.create_job("create-yearly", spec("yearly", cron="0 0 1 1 *"))
    api.update_job("update-yearly", yearly.job_id, yearly.revision,
                   spec("yearly", cron="0 0 1 1 *", payload=b"v2"))
    paused = api.create_job("create-paused", spec("paused", cron="* * * * * *"))
    api.change_job(Command.PAUSE_JOB, "pause-paused", paused.job_id)
    one_off = api.create_job("create-one-off", spec("one-off", at=now + timedelta(hours=1)))
    gone = api.create_job("create-gone", spec("gone", cron="0 0 1 1 *"))
    api.change_job(Command.DELETE_JOB, "delete-gone", gone.job_id)

    def fired() -> list[tuple[Any, ...]] | None:
        with psycopg.connect(settings.postgres_dsn) as conn:
            job = conn.execute("SELECT status FROM jobs WHERE job_id = %s",
                               (firing.job_id,)).fetchone()
            runs = conn.execute("SELECT run_id, attempt FROM runs WHERE job_id = %s "
                                "ORDER BY scheduled_at", (firing.job_id,)).fetchall()
        return runs if job == ("completed",) and len(runs) >= 2 else None

    runs = wait_for(fired, 30, "the bounded job fired its runs and completed")
    # No worker serves the queue: the runs stay dispatched; one is reported started.
    run_id, attempt = runs[0]
    sink = KafkaReportSink(settings, AvroCodec(), "rebuild-worker")
    sink.send(str(firing.job_id), Report.ATTEMPT_STARTED, {
        "run_id": str(run_id), "job_id": str(firing.job_id), "attempt": attempt,
        "worker": "rebuild-worker", "started_at": datetime.now(UTC)})
    sink.ship()
    sink.flush(10)

    def running() -> bool:
        with psycopg.connect(settings.postgres_dsn) as conn:
            row = conn.execute("SELECT status FROM runs WHERE run_id = %s",
                               (run_id,)).fetchone()
        return row == ("running",)

    wait_for(running, 30, "a run running")
    return {"firing": firing, "yearly": yearly, "paused": paused, "one_off": one_off,
            "gone": gone}


def test_an_owner_on_an_empty_database_rebuilds_every_partition_from_the_log(
        isolated: Settings) -> None:
    settings = isolated
    provision(settings)
    with owner_running(settings), api_of(settings) as api:
        jobs = build_state(settings, api)
    lost = snapshot(settings.postgres_dsn)
    assert {row[4] for row in lost["jobs"]} == {"active", "paused", "completed", "deleted"}
    assert {row[4] for row in lost["runs"]} == {"scheduled", "running"}
    assert any(row[5] is not None for row in lost["requests"]), "digests recorded"

    rebuilt = empty_database(settings)
    with owner_running(rebuilt) as owner, api_of(rebuilt) as api:
        found = snapshot(rebuilt.postgres_dsn)
        for what in STATE:
            assert found[what] == lost[what], f"{what} rebuilt unlike the lost database"
        # The runs in flight are the rebuilt owner's to watch again.
        assert len(owner.deadlines) + len(owner.start_deadlines) >= 3
        # A retried request gets its first outcome; its id with another body is refused.
        again = api.change_job(Command.PAUSE_JOB, "pause-paused", jobs["paused"].job_id)
        assert again.version == jobs["paused"].version + 1
        with pytest.raises(CommandRejected) as refused:
            api.update_job("update-yearly", jobs["yearly"].job_id, 0,
                           spec("yearly", cron="0 0 1 1 *", payload=b"v3"))
        assert refused.value.status == "INVALID_ARGUMENT" and refused.value.field == "request_id"
        assert snapshot(rebuilt.postgres_dsn)["offsets"] == lost["offsets"], \
            "retries answered from the rebuilt requests write nothing"
    # Epochs never repeat across a replaced database: an owner frozen with an epoch of the
    # lost one cannot pass the new one's fence.
    assert min(epochs(rebuilt.postgres_dsn)) > max(epochs(settings.postgres_dsn))


def test_a_rebuild_goes_past_runs_whose_first_events_retention_removed(
        isolated: Settings) -> None:
    """Run events are kept for the history horizon, not forever: a rebuild after retention
    removed the start of a run's events applies the rest without that run, rather than
    stopping at its first change (a partition that never catches up never fires)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from cronlog.commands.owner.ports import Outgoing
    from cronlog.domain.job import Job
    from cronlog.infra.avro.event_mapping import event_to_record
    from cronlog.infra.kafka.client_config import admin_config
    from cronlog.infra.kafka.event_replay import KafkaEventReplay
    from cronlog.infra.owner_adapters import OwnerLogReplay, OwnerStoreAdapter
    from cronlog.infra.postgres.owner_state import PostgresOwnerState

    settings = isolated
    codec = AvroCodec()
    transport = owning_transport(settings, codec)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    job = Job.create(uuid.uuid4(), spec("trimmed", cron="* * * * * *"), "req", t0)
    old, new = job.fire(t0), job.fire(t0)
    old.start(1, "w", t0, t0)
    new.start(1, "w", t0, t0)

    def outgoing(topic: str, aggregate: Any) -> list[Outgoing]:
        return [Outgoing(topic, str(job.id), *event_to_record(e))
                for e in aggregate.collect_events()]

    scheduled = transport.transact(outgoing(settings.run_events_topic, old))
    transport.transact(outgoing(settings.job_events_topic, job)
                       + outgoing(settings.run_events_topic, new))
    old.succeed(1, "w", t0, b"", False, t0)
    new.succeed(1, "w", t0, b"", False, t0)
    transport.transact(outgoing(settings.run_events_topic, old)
                       + outgoing(settings.run_events_topic, new))
    transport.close()
    partition = scheduled[0].partition
    # Retention removed the old run's RunScheduled and AttemptStarted, and nothing after.
    admin = AdminClient(admin_config(settings))
    cut = max(p.offset for p in scheduled) + 1
    for future in admin.delete_records(
            [TopicPartition(settings.run_events_topic, partition, cut)]).values():
        future.result(30)

    rebuilt = empty_database(settings)
    state = PostgresOwnerState(rebuilt.postgres_dsn)
    store = OwnerStoreAdapter(state, codec)
    replay = OwnerLogReplay(KafkaEventReplay(rebuilt, codec), state, rebuilt)
    catch_up(replay, store.take_epochs([partition], "rebuilding-owner"))
    assert store.run(old.id) is None, "begun before the log's oldest run event"
    kept = store.run(new.id)
    assert kept is not None and kept.status == "succeeded"
    restored = store.job(job.id)
    assert restored is not None and restored.next_fire_at == job.next_fire_at
