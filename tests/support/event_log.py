"""Writes a job's events to the log as an owner would (encoded, keyed by job id, on the job's
partition), and projects them into the live Postgres state and ClickHouse history with
the real code, for tests of what reads the log back (audit, replay)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

from confluent_kafka import Producer

from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.composition import build_history_projector, build_run_history
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.owner_adapters import OwnerLogReplay, OwnerStoreAdapter
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.polling import wait_for


@dataclass(frozen=True)
class WrittenJob:
    job_id: UUID
    partition: int
    run_ids: list[str]
    job_events: int
    run_events: int


def write_job(settings: Settings, runs: int, tenant: str = "acme") -> WrittenJob:
    """A job firing every second from now, with `runs` runs that each succeed."""
    codec = AvroCodec()
    now = datetime.now(UTC).replace(microsecond=0)
    job = Job.create(uuid4(), JobSpec(name="n", tenant=tenant, queue="default", handler="echo",
                                      cron="* * * * * *"), "req-1", now)
    fired = []
    for n in range(runs):
        run = job.fire(now + timedelta(seconds=n))
        at = now + timedelta(seconds=n + 1)
        assert run.start(run.attempt, "w", at, at)
        assert run.succeed(run.attempt, "w", at, b"ok", False, at)
        fired.append(run)
    partition = partition_for(str(job.id), settings.partitions)
    job_events = [event_to_record(e) for e in job.collect_events()]
    run_events = [event_to_record(e) for r in fired for e in r.collect_events()]
    producer = Producer(producer_config(settings))
    for topic, events in ((settings.job_events_topic, job_events),
                          (settings.run_events_topic, run_events)):
        for name, record in events:
            producer.produce(topic, key=str(job.id).encode(), value=codec.encode(name, record),
                             partition=partition)
    assert producer.flush(30) == 0
    return WrittenJob(job.id, partition, [str(r.id) for r in fired], len(job_events),
                      len(run_events))


def project_live(settings: Settings, written: WrittenJob) -> None:
    """Applies the log to the live projections: Postgres as a new owner catches up, and
    ClickHouse through the history projector, until the job's runs are in history."""
    codec = AvroCodec()
    state = PostgresOwnerState(settings.postgres_dsn)
    store = OwnerStoreAdapter(state, codec)
    catch_up = OwnerLogReplay(KafkaEventReplay(settings, codec), state, settings).start(
        store.take_epochs(list(range(settings.partitions)), "test-owner"))
    wait_for(lambda: catch_up.advance(0.2) is not None and catch_up.finished, 30,
             "the owner's catch-up")
    state.close()
    loop = build_history_projector(settings)
    history = build_run_history(settings)

    def projected() -> bool:
        loop.step()
        # Job and run events come from two topics: the runs can be in before the job's row.
        return len(history.latest_attempt_rows(written.run_ids)) == len(written.run_ids) and all(
            rows and rows[-1].run_status == "succeeded"
            for rows in history.latest_attempt_rows(written.run_ids).values()) and bool(
            history.latest_job_rows([str(written.job_id)]))

    try:
        wait_for(projected, 60, "the job and its runs in the live history")
    finally:
        loop.stop()
        loop.run_forever()  # closes the feed at once: stop is set
