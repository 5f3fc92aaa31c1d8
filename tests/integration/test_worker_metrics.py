"""A worker's /metrics and /readyz against a real broker: not ready until its queue's
partitions are assigned and Kafka's statistics say a broker is up; a run it starts shows in
its start-lag and handler histograms, its queue's partitions and depth in the gauges."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime
from uuid import uuid4

import pytest
from confluent_kafka import Producer

from cronlog.domain.catalogue import OwnerRecord
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.composition import build_worker
from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import producer_config
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.observability.server import OperatorEndpoints
from cronlog.infra.observability.worker import WorkerObservation
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


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


def dispatch_now(settings: Settings) -> None:
    job_id, now = uuid4(), datetime.now(UTC)
    value = AvroCodec().encode(OwnerRecord.DISPATCH, {
        "run_id": uuid4(), "job_id": job_id, "attempt": 1, "tenant": "acme",
        "handler": "echo", "payload": b"hi", "scheduled_at": now, "not_before": now,
        "timeout_ms": 10_000, "heartbeat_timeout_ms": 30_000, "idempotency_key": "k"})
    producer = Producer(producer_config(settings))
    producer.produce(settings.dispatch_topic("default"), value=value, key=str(job_id).encode(),
                     partition=partition_for(str(job_id), settings.partitions))
    assert producer.flush(10) == 0


@pytest.fixture
def isolated(stack_settings: Settings) -> Settings:
    """Topics of its own; a worker needs no database."""
    tag = "t" + uuid4().hex[:10]
    return stack_settings.with_overrides(topic_prefix=f"{tag}.", worker_id=f"{tag}-worker")


def test_worker_metrics_and_readiness(isolated: Settings) -> None:
    ensure_core_topics(isolated)
    observation = WorkerObservation()
    worker = build_worker(isolated, "default", observation)
    endpoints = OperatorEndpoints(observation.metrics, observation.readiness, "127.0.0.1",
                                  0).start()
    thread = threading.Thread(target=worker.run_forever, name="worker-default")
    try:
        status, body = get(endpoints.url + "/readyz")
        assert status == 503
        assert "queue default: no partitions assigned yet" in " ".join(
            json.loads(body)["not_ready"])
        assert get(endpoints.url + "/healthz")[0] == 200
        thread.start()
        wait_for(lambda: get(endpoints.url + "/readyz")[0] == 200, 60,
                 "the worker ready (partitions assigned, a broker up)")
        text = get(endpoints.url + "/metrics")[1]
        assert sample(text, 'cronlog_worker_assigned_partitions{queue="default"}') == \
            isolated.partitions
        assert sample(text, 'cronlog_kafka_brokers_up{client="dispatch.default"}') == 1
        assert sample(text, 'cronlog_ready{role="worker"}') == 1
        assert sample(text, 'cronlog_worker_free_slots{queue="default"}') == \
            isolated.worker_slots

        dispatch_now(isolated)
        handled = 'cronlog_worker_handler_duration_seconds_count{handler="echo",' \
                  'outcome="succeeded",queue="default"}'

        def handled_once() -> str | None:
            text = get(endpoints.url + "/metrics")[1]
            return text if sample(text, handled) == 1 else None

        text = wait_for(handled_once, 30, "the run handled")
        assert sample(text, 'cronlog_worker_start_lag_seconds_count{queue="default"}') == 1
        # Produced at its due time: it started within the SLO.
        assert sample(text, 'cronlog_worker_start_lag_seconds_bucket{le="2.0",'
                            'queue="default"}') == 1
        wait_for(lambda: sample(get(endpoints.url + "/metrics")[1],
                                'cronlog_worker_reports_pending{queue="default"}') == 0,
                 30, "its reports acknowledged")
    finally:
        worker.stop()
        if thread.is_alive():
            thread.join(30)
        endpoints.stop()
