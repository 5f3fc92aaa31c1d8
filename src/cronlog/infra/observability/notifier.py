"""The notifier's metrics and readiness (docs/alerts.md, docs/operations.md): alerts read,
attempts by channel kind and outcome, the deliveries it holds; ready once the notifier group
has assigned its consumer partitions (none is a standby, not a fault) and a broker is up."""

from __future__ import annotations

import time
from collections.abc import Callable

from cronlog.infra.observability.catalogue import (
    NOTIFIER_ALERTS_READ,
    NOTIFIER_ATTEMPTS,
    NOTIFIER_HELD,
)
from cronlog.infra.observability.kafka_stats import KafkaStatistics, kafka_problem
from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.server import Readiness

# The notifier's consumer, as its Kafka statistics name it.
NOTIFIER_CLIENT = "notifier"


class NotifierObservation:
    """The notifier role's registry, the loop's NotifierMetrics, and its readiness."""

    def __init__(self, metrics: RoleMetrics | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.metrics = metrics or RoleMetrics("notifier")
        self.kafka = KafkaStatistics(clock=monotonic)
        self._read = self.metrics.counter(NOTIFIER_ALERTS_READ)
        self._attempts = self.metrics.counter(NOTIFIER_ATTEMPTS)
        self._held = self.metrics.gauge(NOTIFIER_HELD)
        self._assignment: Callable[[], object | None] | None = None
        self.metrics.add_collector(self.kafka)

    def watch(self, assignment: Callable[[], object | None]) -> None:
        self._assignment = assignment

    # NotifierMetrics, called on the loop's thread.
    def alerts_read(self, count: int) -> None:
        self._read.inc(count)

    def attempted(self, channel_kind: str, outcome: str) -> None:
        self._attempts.labels(channel_kind, outcome).inc()

    def holding(self, deliveries: int) -> None:
        self._held.set(deliveries)

    def readiness(self) -> Readiness:
        if self._assignment is None:
            return Readiness(("starting: the notifier loop is not built yet",))
        not_ready: list[str] = []
        if self._assignment() is None:
            not_ready.append("no partitions assigned yet (joining the notifier group)")
        kafka = kafka_problem(self.kafka.latest(NOTIFIER_CLIENT))
        if kafka is not None:
            not_ready.append(kafka)
        return Readiness(tuple(not_ready))
