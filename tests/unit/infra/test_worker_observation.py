"""The worker role's exported numbers and readiness, from librdkafka statistics and its
loops' probes (no broker: the statistics are librdkafka's JSON, the probes functions)."""

from __future__ import annotations

from prometheus_client import generate_latest

from cronlog.infra.observability.kafka_stats import (
    STALE_AFTER,
    KafkaStatistics,
    parse_statistics,
)
from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.worker import QueueProbes, WorkerObservation
from cronlog.worker.runtime import Occupancy
from tests.support.kafka_statistics import statistics


def test_statistics_count_brokers_up_and_lag_of_assigned_partitions_only() -> None:
    stats = parse_statistics(statistics(lags={"0": 4, "1": 6, "2": -1}))
    assert stats.brokers_up == 1 and stats.queued_messages == 3
    assert stats.slowest_rtt_seconds == 0.0025
    assert stats.consumer_lag == {"cronlog.dispatch.default": 10}
    assert parse_statistics(statistics(up=False)).brokers_up == 0


def test_statistics_go_stale_when_the_client_stops_polling() -> None:
    now = [100.0]
    kafka = KafkaStatistics(clock=lambda: now[0])
    assert kafka.latest("dispatch.default") is None
    kafka.listener("dispatch.default")(statistics())
    assert kafka.latest("dispatch.default") is not None
    now[0] += STALE_AFTER + 1
    assert kafka.latest("dispatch.default") is None


class Probe:
    def __init__(self) -> None:
        self.assignment: frozenset[int] | None = None

    def probes(self) -> QueueProbes:
        return QueueProbes(lambda: Occupancy(3, 13, 7), lambda: self.assignment, lambda: 5)


def test_ready_once_each_queue_has_its_assignment_and_a_broker() -> None:
    observation = WorkerObservation(RoleMetrics("worker", default_collectors=False))
    assert not observation.readiness().ready
    probe = Probe()
    observation.watch("default", probe.probes())
    assert observation.readiness().not_ready == (
        "queue default: no partitions assigned yet (joining its worker group)",
        "queue default: no Kafka statistics within 15 s (starting, Kafka unreachable, or the "
        "loop stuck)")
    probe.assignment = frozenset({0, 1})
    observation.kafka.listener("dispatch.default")(statistics(up=False))
    assert observation.readiness().not_ready == ("queue default: no Kafka broker reachable",)
    observation.kafka.listener("dispatch.default")(statistics(lags={"0": 2, "1": 3}))
    assert observation.readiness().ready


def test_gauges_are_read_from_the_probes_when_scraped() -> None:
    observation = WorkerObservation(RoleMetrics("worker", default_collectors=False))
    probe = Probe()
    probe.assignment = frozenset({0, 1, 2})
    observation.watch("default", probe.probes())
    observation.kafka.listener("dispatch.default")(statistics(lags={"0": 2, "1": 3}))
    queue = observation.for_queue("default")
    queue.run_started(2.5, "waited_here")
    queue.handler_finished("echo", "succeeded", 0.01)
    queue.attempt_cancelled("held")
    queue.attempts_lost("report_dropped", 2)
    text = generate_latest(observation.metrics.registry).decode()
    for line in ('cronlog_worker_busy_slots{queue="default"} 3.0',
                 'cronlog_worker_free_slots{queue="default"} 13.0',
                 'cronlog_worker_held_dispatches{queue="default"} 7.0',
                 'cronlog_worker_reports_pending{queue="default"} 5.0',
                 'cronlog_worker_assigned_partitions{queue="default"} 3.0',
                 'cronlog_worker_start_lag_seconds_bucket{le="2.0",queue="default"} 0.0',
                 'cronlog_worker_start_lag_seconds_bucket{le="3.0",queue="default"} 1.0',
                 'cronlog_worker_late_starts_total{cause="waited_here",queue="default"} 1.0',
                 'cronlog_worker_handler_duration_seconds_count{handler="echo",outcome="succeeded",'
                 'queue="default"} 1.0',
                 'cronlog_worker_attempts_cancelled_total{queue="default",stage="held"} 1.0',
                 'cronlog_worker_attempts_lost_total{queue="default",reason="report_dropped"} 2.0',
                 'cronlog_kafka_brokers_up{client="dispatch.default"} 1.0',
                 'cronlog_kafka_consumer_lag_messages{client="dispatch.default",'
                 'topic="cronlog.dispatch.default"} 5.0'):
        assert line in text, line
