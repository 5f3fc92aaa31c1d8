"""A scheduler built by the composition root against the real stack: its /readyz says what
it waits for until it owns every partition with Kafka and Postgres reachable, and its
/metrics show the takeover, its Kafka clients, the runs it fires with the lead they had
left, the tenant's runs in flight and a command it refused."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest

from cronlog.commands.api.job_api import CommandRejected, JobApi
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.composition import build_scheduler
from cronlog.infra.config import Settings
from cronlog.infra.declared_queues import declared_queues
from cronlog.infra.grpc.server import SpecRecords
from cronlog.infra.kafka.command_channel import KafkaCommandChannel
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.scheduler import (
    PostgresCheck,
    SchedulerObservation,
    ask_postgres,
)
from cronlog.infra.observability.server import OperatorEndpoints
from cronlog.infra.postgres.job_queries import PostgresJobQueries
from cronlog.infra.system_clock import SystemClock
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration

TENANT = "metrics"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sample(text: str, series: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


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


def test_scheduler_metrics_and_readiness(isolated: Settings) -> None:
    settings = isolated
    ensure_core_topics(settings)
    observation = SchedulerObservation(PostgresCheck(ask_postgres(settings.postgres_dsn)),
                                       RoleMetrics("scheduler"))
    endpoints = OperatorEndpoints(observation.metrics, observation.readiness, "127.0.0.1",
                                  0).start()
    status, body = get(endpoints.url + "/readyz")
    assert (status, json.loads(body)["not_ready"]) == (
        503, ["starting: the partition owner is not built yet"])
    owner, transport = build_scheduler(settings, observation)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            owner.cycle()

    thread = threading.Thread(target=loop, name="owner", daemon=True)
    try:
        status, body = get(endpoints.url + "/readyz")
        assert status == 503
        assert "no inbox partitions assigned yet (joining the scheduler group)" in \
            json.loads(body)["not_ready"]
        assert get(endpoints.url + "/healthz")[0] == 200
        thread.start()
        wait_for(lambda: get(endpoints.url + "/readyz")[0] == 200, 60,
                 "the scheduler ready (every partition caught up, Kafka and Postgres up)")
        text = get(endpoints.url + "/metrics")[1]
        partitions = settings.partitions
        assert sample(text, "cronlog_scheduler_owned_partitions") == partitions
        # A take that failed (a topic just made, its leaders not yet known) takes its
        # partitions again, each under a new epoch: counted again (docs/operations.md).
        takeovers = sample(text, "cronlog_scheduler_takeovers_total")
        assert takeovers is not None and takeovers >= partitions
        assert sample(text, "cronlog_scheduler_catch_up_duration_seconds_count") == partitions
        assert sample(text, 'cronlog_ready{role="scheduler"}') == 1
        assert sample(text, 'cronlog_kafka_brokers_up{client="inbox"}') == 1
        assert sample(text, 'cronlog_scheduler_in_flight_runs{tenant="other"}') == 0
        assert "process_cpu_seconds_total" in text

        with api_of(settings) as api:
            job = api.create_job("create-every-second", JobSpec(
                name="every-second", tenant=TENANT, queue="default", handler="echo",
                cron="* * * * * *", heartbeat_timeout=timedelta(minutes=10)))
            with pytest.raises(CommandRejected) as refused:
                api.update_job("stale-update", job.job_id, job.version + 5, JobSpec(
                    name="every-second", tenant=TENANT, queue="default", handler="echo",
                    cron="*/2 * * * * *"))
            assert refused.value.status == "FAILED_PRECONDITION"

        def fired() -> str | None:
            text = get(endpoints.url + "/metrics")[1]
            created = sample(text, 'cronlog_scheduler_runs_created_total{queue="default"}')
            return text if created is not None and created >= 3 else None

        text = wait_for(fired, 30, "the job's runs fired")
        created = sample(text, 'cronlog_scheduler_runs_created_total{queue="default"}')
        leads = sample(text, 'cronlog_scheduler_start_lead_seconds_count{queue="default"}')
        # Every run fired by its schedule ahead of its time (a scrape may come between a
        # cycle's counts and its leads).
        assert leads is not None and created is not None and 0 < leads <= created
        # Fired a lookahead ahead, most became readable before their time.
        late = sample(text, 'cronlog_scheduler_start_lead_seconds_bucket{le="0.0",'
                            'queue="default"}')
        assert late is not None and late < leads
        assert (sample(text, 'cronlog_scheduler_lookahead_seconds') or 0) >= \
            settings.lookahead.total_seconds()
        # No worker serves the queue: every run is still in flight.
        assert (sample(text, f'cronlog_scheduler_in_flight_runs{{tenant="{TENANT}"}}') or 0) \
            >= created
        assert sample(text, 'cronlog_scheduler_commands_rejected_total'
                            '{code="FAILED_PRECONDITION"}') == 1
        assert (sample(text, "cronlog_scheduler_cycle_duration_seconds_count") or 0) > 0
        # The create, then the refusal and the fires (possibly in one cycle).
        assert (sample(text, "cronlog_scheduler_commit_duration_seconds_count") or 0) >= 2
        # JobCreated and JobRequestApplied, then a RunScheduled each (and the job's advances).
        assert (sample(text, "cronlog_scheduler_cycle_events_sum") or 0) >= 2 + created
        # The transactional producer's statistics come while it commits cycles.
        wait_for(lambda: sample(get(endpoints.url + "/metrics")[1],
                                'cronlog_kafka_brokers_up{client="transactions"}'), 20,
                 "the transactional producer's statistics")
    finally:
        stop.set()
        if thread.is_alive():
            thread.join(30)
        transport.close()  # type: ignore[attr-defined]
        endpoints.stop()
