"""Invariant 3 against real Kafka and Postgres: events committed to the log but never applied
(the owner died between the two) are applied by the next owner before it fires."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest
from confluent_kafka import Producer

from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.job import Job
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import event_to_record
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.infra.owner_adapters import OwnerLogReplay, OwnerStoreAdapter
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from tests.support.owner_kafka import catch_up, owning_transport

pytestmark = pytest.mark.integration
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_new_owner_applies_committed_but_unapplied_events(isolated: Settings) -> None:
    codec = AvroCodec()
    transport = owning_transport(isolated, codec)
    job = Job.create(uuid4(),
                     JobSpec(name="n", tenant="t", queue="q", handler="echo", cron="0 * * * *"),
                     "req", T0)
    run = job.fire(T0)
    out = [Outgoing(isolated.job_events_topic, str(job.id), *event_to_record(e))
           for e in job.collect_events()]
    out += [Outgoing(isolated.run_events_topic, str(job.id), *event_to_record(e))
            for e in run.collect_events()]
    produced = transport.transact(out)
    transport.close()
    partition = produced[0].partition
    # Bytes no owner wrote, after the events on both topics: a takeover must not stop on
    # them (invariant 9); no state derives from them.
    junk = Producer({"bootstrap.servers": isolated.kafka_bootstrap})
    for topic in (isolated.job_events_topic, isolated.run_events_topic):
        junk.produce(topic, key=b"junk", value=b"\xc3\x01not avro", partition=partition)
    junk.flush(30)

    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, codec)
    assert store.job(job.id) is None, "the dead owner never applied its events"
    replay = OwnerLogReplay(KafkaEventReplay(isolated, codec), state, isolated)
    catch_up(replay, store.take_epochs([partition], "next-owner"))
    restored = store.job(job.id)
    assert restored is not None
    assert restored.next_fire_at == job.next_fire_at and restored.version == job.version
    assert store.run(run.id) is not None
    # A later takeover starts from the applied offsets: nothing is applied twice.
    [claim] = store.take_epochs([partition], "third-owner")
    assert claim.job_events_offset > max(p.offset for p in produced
                                         if p.topic == isolated.job_events_topic)
    catch_up(replay, [claim])


def test_a_new_owner_catches_up_every_partition_it_takes_at_once(isolated: Settings) -> None:
    codec = AvroCodec()
    transport = owning_transport(isolated, codec)
    spec = JobSpec(name="n", tenant="t", queue="q", handler="echo", cron="0 * * * *")
    jobs, runs = [], []
    for _ in range(3):  # three transactions: several commit markers in each partition
        out = []
        for _ in range(8):
            job = Job.create(uuid4(), spec, "req", T0)
            run = job.fire(T0)
            jobs.append(job)
            runs.append(run)
            out += [Outgoing(isolated.job_events_topic, str(job.id), *event_to_record(e))
                    for e in job.collect_events()]
            out += [Outgoing(isolated.run_events_topic, str(job.id), *event_to_record(e))
                    for e in run.collect_events()]
        produced = transport.transact(out)
    transport.close()
    assert len({p.partition for p in produced}) > 1, "the jobs span several partitions"

    state = PostgresOwnerState(isolated.postgres_dsn)
    store = OwnerStoreAdapter(state, codec)
    replay = OwnerLogReplay(KafkaEventReplay(isolated, codec), state, isolated)
    claims = store.take_epochs(list(range(isolated.partitions)), "next-owner")
    assert [c.partition for c in claims] == list(range(isolated.partitions))
    catch_up(replay, claims)
    for job, run in zip(jobs, runs, strict=True):
        restored = store.job(job.id)
        assert restored is not None and restored.next_fire_at == job.next_fire_at
        assert store.run(run.id) is not None
    again = store.take_epochs(list(range(isolated.partitions)), "third-owner")
    assert all(a.epoch == c.epoch + 1 for a, c in zip(again, claims, strict=True))
    assert sum(a.job_events_offset for a in again) >= len(jobs) * 2
