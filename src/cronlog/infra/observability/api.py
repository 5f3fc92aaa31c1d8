"""The api role's metrics and readiness: the RequestMetrics port (infra/grpc/request_metrics.py)
made into the cronlog_api_* series, the CommandPath (commands/api/readiness.py) its gRPC health and
/readyz follow besides the partition owners, and its Kafka clients' statistics.

The command path works while the reply reader reads (it has partitions of the replies topic,
goes round, and has not stopped) and the inbox producer reaches a broker. Producer
statistics come every STATISTICS_INTERVAL_MS: until the first (the api just started, having
reached Kafka to start at all) the producer is taken at its word."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from prometheus_client import Counter, Histogram

from cronlog.commands.api.readiness import ReadinessWatch
from cronlog.infra.grpc.tenant_budget import REASONS
from cronlog.infra.observability.catalogue import (
    API_REFUSALS,
    API_REQUEST_DURATION,
    API_REQUESTS,
)
from cronlog.infra.observability.kafka_stats import STALE_AFTER, KafkaStatistics
from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.server import Readiness

# The api's Kafka clients, as their statistics name them.
COMMANDS_CLIENT = "commands"
REPLIES_CLIENT = "replies"


class ApiObservation:
    """The api role's registry, its RequestMetrics, its CommandPath and its readiness."""

    def __init__(self, metrics: RoleMetrics | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics or RoleMetrics("api")
        self.kafka = KafkaStatistics(clock=monotonic)
        self.metrics.add_collector(self.kafka)
        self._monotonic = monotonic
        self._requests = self.metrics.counter(API_REQUESTS)
        self._durations = self.metrics.histogram(API_REQUEST_DURATION)
        self._children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        refusals = self.metrics.counter(API_REFUSALS)
        self._refusals = {reason: refusals.labels(reason) for reason in REASONS}
        self._reader_problem: Callable[[], str | None] = lambda: "starting: no reply reader yet"
        self._started = monotonic()
        self._watch: ReadinessWatch | None = None

    # RequestMetrics, called on the server's threads.
    def request_answered(self, method: str, code: str, seconds: float) -> None:
        children = self._children.get((method, code))
        if children is None:
            # Two threads may make the same pair at once: prometheus-client returns the
            # same child to both.
            children = self._children[(method, code)] = (
                self._requests.labels(method, code), self._durations.labels(method))
        requests, duration = children
        requests.inc()
        duration.observe(seconds)

    # RefusalMetrics (infra/grpc/budget_interceptor.py): reasons outside REASONS are ignored.
    def request_refused(self, reason: str) -> None:
        counter = self._refusals.get(reason)
        if counter is not None:
            counter.inc()

    def watch_reply_reader(self, problem: Callable[[], str | None]) -> None:
        self._reader_problem = problem

    def watch_owners(self, watch: ReadinessWatch) -> None:
        self._watch = watch

    # CommandPath, asked by the readiness watch every half second.
    def problems(self) -> Sequence[str]:
        found: list[str] = []
        reader = self._reader_problem()
        if reader is not None:
            found.append(reader)
        producer = self._producer_problem()
        if producer is not None:
            found.append(producer)
        return found

    def _producer_problem(self) -> str | None:
        stats = self.kafka.latest(COMMANDS_CLIENT)
        if stats is None:
            if self._monotonic() - self._started <= STALE_AFTER:
                return None
            return (f"the inbox producer has given no Kafka statistics within "
                    f"{STALE_AFTER:.0f} s (Kafka unreachable, or the reply reader stuck)")
        if stats.brokers_up == 0:
            return "the inbox producer reaches no Kafka broker"
        return None

    def readiness(self) -> Readiness:
        """/readyz: what the gRPC health follows, as last read by the watch."""
        if self._watch is None:
            return Readiness(("starting: the api is not built yet",))
        current = self._watch.current
        if current.ready:
            return Readiness()
        return Readiness((current.summary(),))
