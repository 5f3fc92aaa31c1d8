"""The worker role's metrics and readiness: the WorkerMetrics port (worker/ports.py) made
into the cronlog_worker_* series, and gauges read at scrape time from each queue's loop,
dispatch consumer and report sink. Slots by tenant name the IN_FLIGHT_TOP_TENANTS tenants
holding the most, the rest as OTHER_TENANTS: one series per tenant would grow with them."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter

from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily

from cronlog.infra.observability.catalogue import (
    IN_FLIGHT_TOP_TENANTS,
    OTHER_TENANTS,
    WORKER_ASSIGNED_PARTITIONS,
    WORKER_ATTEMPTS_CANCELLED,
    WORKER_ATTEMPTS_LOST,
    WORKER_BUSY_SLOTS,
    WORKER_FREE_SLOTS,
    WORKER_HANDLER_DURATION,
    WORKER_HELD_DISPATCHES,
    WORKER_LATE_STARTS,
    WORKER_REPORTS_PENDING,
    WORKER_START_LAG,
    WORKER_TENANT_BUSY_SLOTS,
    WORKER_TENANT_SHARE,
)
from cronlog.infra.observability.kafka_stats import KafkaStatistics, kafka_problem
from cronlog.infra.observability.registry import RoleMetrics, gauge_family
from cronlog.infra.observability.server import Readiness
from cronlog.worker.runtime import Occupancy


class QueueMetrics:
    """One queue's loop's WorkerMetrics. Label children are looked up once, not per run."""

    def __init__(self, metrics: RoleMetrics, queue: str) -> None:
        self._queue = queue
        self._lag = metrics.histogram(WORKER_START_LAG).labels(queue)
        late = metrics.counter(WORKER_LATE_STARTS)
        self._late = {cause: late.labels(queue, cause) for cause in ("arrived_late",
                                                                     "waited_here")}
        self._durations = metrics.histogram(WORKER_HANDLER_DURATION)
        self._duration_of: dict[tuple[str, str], Histogram] = {}
        self._cancelled = metrics.counter(WORKER_ATTEMPTS_CANCELLED)
        self._lost = metrics.counter(WORKER_ATTEMPTS_LOST)

    def run_started(self, lag_seconds: float, late_cause: str | None) -> None:
        self._lag.observe(lag_seconds)
        if late_cause is not None:
            self._late[late_cause].inc()

    def handler_finished(self, handler: str, outcome: str, seconds: float) -> None:
        child = self._duration_of.get((handler, outcome))
        if child is None:
            child = self._duration_of[(handler, outcome)] = self._durations.labels(
                self._queue, handler, outcome)
        child.observe(seconds)

    def attempt_cancelled(self, stage: str) -> None:
        self._cancelled.labels(self._queue, stage).inc()

    def attempts_lost(self, reason: str, count: int) -> None:
        self._lost.labels(self._queue, reason).inc(count)


@dataclass(frozen=True)
class QueueProbes:
    """What a scrape or a readiness check reads of one queue's loop."""

    occupancy: Callable[[], Occupancy]
    # The dispatch partitions the worker group gave this worker; None until it has
    # answered (joining, or rejoining after the session was lost).
    assignment: Callable[[], frozenset[int] | None]
    reports_pending: Callable[[], int]


def top_tenants(counts: Mapping[str, int], top: int = IN_FLIGHT_TOP_TENANTS
                ) -> list[tuple[str, int]]:
    """The `top` tenants with the most slots, then the others' slots as one OTHER_TENANTS
    entry, always there (a tenant named like it counts in it). The scheduler's in-flight
    gauge cuts the same way; this copy keeps the worker from importing the scheduler's."""
    named = heapq.nlargest(top, ((t, n) for t, n in counts.items() if t != OTHER_TENANTS),
                           key=itemgetter(1))
    rest = sum(counts.values()) - sum(n for _, n in named)
    return [*sorted(named, key=lambda tn: (-tn[1], tn[0])), (OTHER_TENANTS, rest)]


def dispatch_client(queue: str) -> str:
    """The name a queue's dispatch consumer has in the Kafka metrics."""
    return f"dispatch.{queue}"


class WorkerObservation:
    """The worker role's metrics (one registry for every queue it serves) and readiness:
    every served queue's consumer has its assignment from the group and a broker up."""

    def __init__(self, metrics: RoleMetrics | None = None) -> None:
        self.metrics = metrics or RoleMetrics("worker")
        self.kafka = KafkaStatistics()
        self._probes: dict[str, QueueProbes] = {}
        self.metrics.add_collector(self.kafka)
        self.metrics.add_collector(self)

    def for_queue(self, queue: str) -> QueueMetrics:
        return QueueMetrics(self.metrics, queue)

    def watch(self, queue: str, probes: QueueProbes) -> None:
        self._probes[queue] = probes

    def readiness(self) -> Readiness:
        if not self._probes:
            return Readiness(("starting: no queue's loop built yet",))
        not_ready: list[str] = []
        for queue, probes in sorted(self._probes.items()):
            if probes.assignment() is None:
                not_ready.append(f"queue {queue}: no partitions assigned yet (joining its "
                                 "worker group)")
            kafka = kafka_problem(self.kafka.latest(dispatch_client(queue)))
            if kafka is not None:
                not_ready.append(f"queue {queue}: {kafka}")
        return Readiness(tuple(not_ready))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        probes = sorted(self._probes.items())
        looks = [(q, p.occupancy()) for q, p in probes]
        yield gauge_family(WORKER_BUSY_SLOTS, [((q, ), o.busy_slots) for q, o in looks])
        yield gauge_family(WORKER_FREE_SLOTS, [((q, ), o.free_slots) for q, o in looks])
        yield gauge_family(WORKER_TENANT_BUSY_SLOTS,
                           [((q, tenant), n) for q, o in looks
                            for tenant, n in top_tenants(o.busy_by_tenant)])
        yield gauge_family(WORKER_TENANT_SHARE, [((q, ), o.tenant_share) for q, o in looks])
        yield gauge_family(WORKER_HELD_DISPATCHES, [((q, ), o.held) for q, o in looks])
        yield gauge_family(WORKER_REPORTS_PENDING,
                           [((q, ), p.reports_pending()) for q, p in probes])
        yield gauge_family(WORKER_ASSIGNED_PARTITIONS,
                           [((q, ), len(p.assignment() or ())) for q, p in probes])
