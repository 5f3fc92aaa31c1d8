"""The history projector's metrics and readiness: the HistoryMetrics port
(projections/history_loop.py) made into the cronlog_projector_* series, its lag read at
scrape time from the loop's last batch and the consumer's librdkafka statistics.

Lag in messages is what the log holds past the consumer's position plus the batch the loop
holds and has not stored yet. Lag in seconds is the age of the newest event applied, told
only while events wait (0 when caught up): an idle log is not a lagging projector. Ready:
the history group has assigned the consumer its partitions (none is a standby, not a
fault), a broker is up, ClickHouse answers, and the loop is not stalled: events have waited
STALLED_AFTER seconds with none applied."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.core import GaugeMetricFamily

from cronlog.infra.observability.catalogue import (
    PROJECTOR_EVENTS_APPLIED,
    PROJECTOR_LAG_MESSAGES,
    PROJECTOR_LAG_SECONDS,
    PROJECTOR_REJECTED_EVENTS,
)
from cronlog.infra.observability.kafka_stats import KafkaStatistics, kafka_problem
from cronlog.infra.observability.registry import RoleMetrics, gauge_family
from cronlog.infra.observability.server import Readiness

# The projector's consumer, as its Kafka statistics name it.
HISTORY_CLIENT = "history"
# Events waiting this long with none applied is a stalled projector (ClickHouse refusing
# everything, the loop stuck), not a slow one: a batch takes well under a second.
STALLED_AFTER = 60.0
# A ClickHouse ping per readiness check would be one per scrape and per probe.
CLICKHOUSE_CHECK_EVERY = 10.0


@dataclass(frozen=True)
class ProjectorProbes:
    """What a scrape or a readiness check reads besides the loop's own reports."""

    # The history group's partitions given to this projector; None until it has answered.
    assignment: Callable[[], object | None]
    # A ping of ClickHouse on a connection of its own (the loop's is not thread-safe).
    clickhouse_reachable: Callable[[], bool]


@dataclass(frozen=True)
class ProjectorLag:
    messages: int | None
    seconds: float | None
    stalled_for: float | None


class _CachedCheck:
    def __init__(self, check: Callable[[], bool], every: float,
                 clock: Callable[[], float]) -> None:
        self._check = check
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._value = False

    def __call__(self) -> bool:
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self._every:
                try:
                    self._value = bool(self._check())
                except Exception:
                    self._value = False
                self._at = now
            return self._value


class ProjectorObservation:
    """The projector role's registry, its HistoryMetrics, and its readiness."""

    def __init__(self, metrics: RoleMetrics | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC),
                 monotonic: Callable[[], float] = time.monotonic,
                 stalled_after: float = STALLED_AFTER) -> None:
        self.metrics = metrics or RoleMetrics("projector")
        self.kafka = KafkaStatistics(clock=monotonic)
        self._now = now
        self._monotonic = monotonic
        self._stalled_after = stalled_after
        self._applied = self.metrics.counter(PROJECTOR_EVENTS_APPLIED)
        self._rejected = self.metrics.counter(PROJECTOR_REJECTED_EVENTS)
        self._probes: ProjectorProbes | None = None
        self._lock = threading.Lock()
        self._in_hand = 0
        self._oldest_in_hand: datetime | None = None
        self._newest_applied: datetime | None = None
        # Progress starts at the start: a projector is given STALLED_AFTER to apply anything.
        self._progress_at = monotonic()
        self._waiting_since: float | None = None
        self.metrics.add_collector(self.kafka)
        self.metrics.add_collector(self)

    def watch(self, probes: ProjectorProbes) -> None:
        self._probes = ProjectorProbes(
            probes.assignment,
            _CachedCheck(probes.clickhouse_reachable, CLICKHOUSE_CHECK_EVERY, self._monotonic))

    # HistoryMetrics, called on the loop's thread.
    def batch_received(self, events: int, oldest: datetime | None) -> None:
        with self._lock:
            self._in_hand, self._oldest_in_hand = events, oldest

    def events_applied(self, kinds: Mapping[str, int], newest: datetime | None) -> None:
        for kind, count in kinds.items():
            self._applied.labels(kind).inc(count)
        with self._lock:
            self._in_hand, self._oldest_in_hand = 0, None
            if newest is not None and (self._newest_applied is None
                                       or newest > self._newest_applied):
                self._newest_applied = newest
            self._progress_at = self._monotonic()

    def event_set_aside(self, reason: str) -> None:
        self._rejected.labels(reason).inc()

    def lag(self) -> ProjectorLag:
        stats = self.kafka.latest(HISTORY_CLIENT)
        now = self._monotonic()
        with self._lock:
            in_hand, oldest, newest = self._in_hand, self._oldest_in_hand, self._newest_applied
            unread = None if stats is None else sum(stats.unconsumed.values())
            messages = None if unread is None else unread + in_hand
            waiting = in_hand > 0 or bool(unread)
            if not waiting:
                self._waiting_since = None
                return ProjectorLag(messages, 0.0, None)
            if self._waiting_since is None:
                self._waiting_since = now
            # Waiting since a moment ago after a quiet hour is not an hour without progress.
            stalled_for = now - max(self._progress_at, self._waiting_since)
        since = newest or oldest
        seconds = None if since is None else max(0.0, (self._now() - since).total_seconds())
        return ProjectorLag(messages, seconds, stalled_for)

    def readiness(self) -> Readiness:
        if self._probes is None:
            return Readiness(("starting: the history loop is not built yet",))
        not_ready: list[str] = []
        if self._probes.assignment() is None:
            not_ready.append("no partitions assigned yet (joining the history group)")
        kafka = kafka_problem(self.kafka.latest(HISTORY_CLIENT))
        if kafka is not None:
            not_ready.append(kafka)
        if not self._probes.clickhouse_reachable():
            not_ready.append("ClickHouse does not answer")
        lag = self.lag()
        if lag.stalled_for is not None and lag.stalled_for >= self._stalled_after:
            waiting = "events" if lag.messages is None else f"{lag.messages} events"
            not_ready.append(f"stalled: {waiting} waiting and none applied for "
                             f"{lag.stalled_for:.0f} s")
        return Readiness(tuple(not_ready))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = self.lag()
        yield gauge_family(PROJECTOR_LAG_MESSAGES,
                           [] if lag.messages is None else [((), lag.messages)])
        yield gauge_family(PROJECTOR_LAG_SECONDS,
                           [] if lag.seconds is None else [((), lag.seconds)])
