"""The scheduler role's metrics and readiness: the OwnerMetrics port (commands/owner/ports.py)
made into the cronlog_scheduler_* series, gauges read at scrape time from the partition
owner, and /readyz from its partitions, Kafka's statistics and Postgres."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

import psycopg
from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from cronlog.commands.owner.cycle_tally import CREATED, DEAD_LETTERED, MISSED, SKIPPED
from cronlog.commands.owner.ports import CycleFigures
from cronlog.infra.observability.catalogue import (
    IN_FLIGHT_TOP_TENANTS,
    OTHER_TENANTS,
    SCHEDULER_CARRIED,
    SCHEDULER_CATCH_UP_DURATION,
    SCHEDULER_COMMIT_DURATION,
    SCHEDULER_CYCLE_DURATION,
    SCHEDULER_CYCLE_EVENTS,
    SCHEDULER_CYCLE_MESSAGES,
    SCHEDULER_DEFERRED,
    SCHEDULER_FOLLOWERS_PENDING,
    SCHEDULER_IN_FLIGHT,
    SCHEDULER_LOOKAHEAD,
    SCHEDULER_OVER_BUDGET,
    SCHEDULER_OWNED_PARTITIONS,
    SCHEDULER_POISON,
    SCHEDULER_REJECTED,
    SCHEDULER_RUNS_CREATED,
    SCHEDULER_RUNS_DEAD_LETTERED,
    SCHEDULER_RUNS_FINISHED,
    SCHEDULER_RUNS_MISSED,
    SCHEDULER_RUNS_SKIPPED,
    SCHEDULER_START_LEAD,
    SCHEDULER_TAKEOVERS,
    MetricSpec,
)
from cronlog.infra.observability.kafka_stats import KafkaStatistics, kafka_problem
from cronlog.infra.observability.registry import RoleMetrics, gauge_family
from cronlog.infra.observability.server import Readiness

log = logging.getLogger(__name__)

# The names the owner's Kafka clients have in the Kafka metrics.
INBOX_CLIENT = "inbox"
TRANSACTIONS_CLIENT = "transactions"
# A cycle of an owner with partitions reads the due index: one that ended this recently
# shows Postgres reachable without asking it anything.
CYCLE_SHOWS_POSTGRES = 10.0
# Otherwise (no partitions owned, or cycles failing) Postgres is asked, at most this often
# however often /readyz and scrapes come.
POSTGRES_CHECK_EVERY = 5.0
POSTGRES_CHECK_TIMEOUT = 2
POSTGRES_CHECK = "SELECT 1"
# At most this many partitions are named in a readiness answer.
NAMED_PARTITIONS = 16


class LeadHistogram:
    """The start-lead histogram, filled a cycle's leads at a time: a bisect and an increment
    per run, where prometheus-client's Histogram takes a lock and walks the buckets for each
    observation; exported as the same histogram series."""

    def __init__(self, spec: MetricSpec) -> None:
        self._spec = spec
        self._bounds = list(spec.buckets)
        self._lock = threading.Lock()
        # By queue: the count per bucket (the last one past every bound), the sum.
        self._counts: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def observe_all(self, queue: str, values: Sequence[float]) -> None:
        bounds = self._bounds
        with self._lock:
            counts = self._counts.get(queue)
            if counts is None:
                counts = self._counts[queue] = [0] * (len(bounds) + 1)
                self._sums[queue] = 0.0
            for value in values:
                # bisect_left: a value equal to a bound belongs to that bound's bucket (le).
                counts[bisect_left(bounds, value)] += 1
            self._sums[queue] += sum(values)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._spec.name, self._spec.help,
                                       labels=self._spec.labels)
        with self._lock:
            taken = [(q, list(c), self._sums[q]) for q, c in sorted(self._counts.items())]
        for queue, counts, total in taken:
            cumulative, buckets = 0, []
            for bound, count in zip([*self._bounds, float("inf")], counts, strict=True):
                cumulative += count
                buckets.append((_le(bound), float(cumulative)))
            family.add_metric([queue], buckets, total)
        yield family


def _le(bound: float) -> str:
    # As prometheus-client writes a bucket's bound (le="2.0", le="+Inf").
    return "+Inf" if bound == float("inf") else repr(float(bound))


class SchedulerMetrics:
    """The owner's OwnerMetrics. Label children are looked up once per queue, not per run."""

    def __init__(self, metrics: RoleMetrics, monotonic: Callable[[], float] = time.monotonic,
                 queues: Sequence[str] = ()) -> None:
        self._monotonic = monotonic
        self._duration = metrics.histogram(SCHEDULER_CYCLE_DURATION)
        self._commit = metrics.histogram(SCHEDULER_COMMIT_DURATION)
        self._messages = metrics.histogram(SCHEDULER_CYCLE_MESSAGES)
        self._events = metrics.histogram(SCHEDULER_CYCLE_EVENTS)
        self._lookahead = metrics.gauge(SCHEDULER_LOOKAHEAD)
        self._takeovers = metrics.counter(SCHEDULER_TAKEOVERS)
        self._catch_up = metrics.histogram(SCHEDULER_CATCH_UP_DURATION)
        self._set_aside = metrics.counter(SCHEDULER_POISON)
        self._refused = metrics.counter(SCHEDULER_REJECTED)
        self._over_budget = metrics.counter(SCHEDULER_OVER_BUDGET)
        self._carried = metrics.counter(SCHEDULER_CARRIED)
        self._deferred = metrics.counter(SCHEDULER_DEFERRED)
        self._finished = metrics.counter(SCHEDULER_RUNS_FINISHED)
        self._by_kind = {CREATED: metrics.counter(SCHEDULER_RUNS_CREATED),
                         MISSED: metrics.counter(SCHEDULER_RUNS_MISSED),
                         SKIPPED: metrics.counter(SCHEDULER_RUNS_SKIPPED),
                         DEAD_LETTERED: metrics.counter(SCHEDULER_RUNS_DEAD_LETTERED)}
        self._children: dict[tuple[str, str], Counter] = {}
        self.leads = LeadHistogram(SCHEDULER_START_LEAD)
        metrics.add_collector(self.leads)
        # The declared queues' counters start at 0: increase() over a series that first
        # appears at 1 is 0, so the first missed run or dead letter would never alert.
        for queue in queues:
            for kind in (CREATED, MISSED, SKIPPED, DEAD_LETTERED):
                self._runs(kind, queue)
        # When the last cycle ended (monotonic), None before the first.
        self.last_cycle: float | None = None

    def _runs(self, kind: str, queue: str) -> Counter:
        child = self._children.get((kind, queue))
        if child is None:
            counter = self._by_kind.get(kind)
            # Every other kind is a final status.
            child = counter.labels(queue) if counter is not None \
                else self._finished.labels(queue, kind)
            self._children[(kind, queue)] = child
        return child

    def cycle(self, figures: CycleFigures) -> None:
        self._duration.observe(figures.seconds)
        if figures.commit_seconds is not None:
            self._commit.observe(figures.commit_seconds)
        tally = figures.tally
        self._messages.observe(figures.messages)
        self._events.observe(tally.events)
        self._lookahead.set(figures.lookahead_seconds)
        for (kind, queue), count in tally.runs.items():
            self._runs(kind, queue).inc(count)
        for queue, leads in tally.leads.items():
            self.leads.observe_all(queue, leads)
        if tally.set_aside:
            self._set_aside.inc(tally.set_aside)
        for code, count in tally.refused.items():
            self._refused.labels(code).inc(count)
        if figures.over_budget:
            self._over_budget.inc()
            self._carried.inc(figures.carried)
        if figures.deferred:
            self._deferred.inc(figures.deferred)
        self.last_cycle = self._monotonic()

    def partitions_claimed(self, count: int) -> None:
        self._takeovers.inc(count)

    def caught_up(self, partitions: int, seconds: float) -> None:
        for _ in range(partitions):
            self._catch_up.observe(seconds)


def top_tenants(counts: Mapping[str, int], top: int = IN_FLIGHT_TOP_TENANTS
                ) -> list[tuple[str, int]]:
    """The `top` tenants with the most runs, then every other tenant's runs as one
    OTHER_TENANTS entry (always there, so the series does not come and go). A tenant that is
    itself named like OTHER_TENANTS is counted in it: one series per label value."""
    named = heapq.nlargest(top, ((t, n) for t, n in counts.items() if t != OTHER_TENANTS),
                           key=itemgetter(1))
    rest = sum(counts.values()) - sum(n for _, n in named)
    return [*sorted(named, key=lambda tn: (-tn[1], tn[0])), (OTHER_TENANTS, rest)]


@dataclass(frozen=True)
class OwnerProbes:
    """What a scrape or a readiness check reads of the owner and its transport (from the
    endpoints' threads: each a single look at state the owner's loop changes)."""

    # Partitions the group assigned; None until it has answered (joining, or rejoining
    # after the session was lost).
    assigned: Callable[[], frozenset[int] | None]
    # Partitions owned: claimed and caught up.
    owned: Callable[[], frozenset[int]]
    resyncing: Callable[[], bool]
    in_flight_by_tenant: Callable[[], Mapping[str, int]]
    # Followers of updated calendars still to apply the new version (commands/
    # calendar_followers.py): a count that stays up means the owner is behind.
    calendar_followers_pending: Callable[[], int] = lambda: 0


class PostgresCheck:
    """Whether Postgres answers, asked at most every `every` seconds (the answer is kept
    meanwhile), one question at a time however many probes come together."""

    def __init__(self, ask: Callable[[], None], every: float = POSTGRES_CHECK_EVERY,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._ask = ask
        self._every = every
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._asked: float | None = None
        self._problem: str | None = None

    def problem(self) -> str | None:
        """None when Postgres answered the last question, else why not."""
        with self._lock:
            now = self._monotonic()
            if self._asked is None or now - self._asked >= self._every:
                try:
                    self._ask()
                    self._problem = None
                except Exception as exc:
                    log.warning("readiness: Postgres did not answer: %s", exc)
                    self._problem = f"Postgres unreachable ({type(exc).__name__})"
                self._asked = self._monotonic()
            return self._problem


def ask_postgres(dsn: str) -> Callable[[], None]:
    """A question Postgres answers without touching a table, on a connection of its own
    (the owner's connection belongs to the owner's loop)."""
    def ask() -> None:
        with psycopg.connect(dsn, connect_timeout=POSTGRES_CHECK_TIMEOUT) as conn:
            conn.execute(POSTGRES_CHECK)
    return ask


def _named(partitions: Sequence[int]) -> str:
    shown = ", ".join(str(p) for p in partitions[:NAMED_PARTITIONS])
    more = len(partitions) - NAMED_PARTITIONS
    return shown + (f" and {more} more" if more > 0 else "")


class SchedulerObservation:
    """The scheduler role's metrics (its registry) and readiness: the group has answered
    and every partition it assigned is owned (caught up), no state re-read is pending, the
    inbox consumer's statistics show a broker up, and Postgres answers (a recent cycle
    shows it, else a question at most every few seconds)."""

    def __init__(self, postgres: PostgresCheck, metrics: RoleMetrics | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 queues: Sequence[str] = ()) -> None:
        self.metrics = metrics or RoleMetrics("scheduler")
        self.kafka = KafkaStatistics()
        self.owner_metrics = SchedulerMetrics(self.metrics, monotonic, queues)
        self._postgres = postgres
        self._monotonic = monotonic
        self._probes: OwnerProbes | None = None
        self.metrics.add_collector(self.kafka)
        self.metrics.add_collector(self)

    def watch(self, probes: OwnerProbes) -> None:
        self._probes = probes

    def readiness(self) -> Readiness:
        probes = self._probes
        if probes is None:
            return Readiness(("starting: the partition owner is not built yet",))
        not_ready: list[str] = []
        assigned = probes.assigned()
        if assigned is None:
            not_ready.append("no inbox partitions assigned yet (joining the scheduler group)")
        else:
            behind = sorted(assigned - probes.owned())
            if behind:
                not_ready.append(f"catching up partitions {_named(behind)} (replaying their "
                                 "log before firing them)")
        if probes.resyncing():
            not_ready.append("re-reading state after a cycle failed (Kafka or Postgres)")
        kafka = kafka_problem(self.kafka.latest(INBOX_CLIENT), "the owner's loop")
        if kafka is not None:
            not_ready.append(kafka)
        last = self.owner_metrics.last_cycle
        if last is None or self._monotonic() - last > CYCLE_SHOWS_POSTGRES:
            problem = self._postgres.problem()
            if problem is not None:
                not_ready.append(problem)
        return Readiness(tuple(not_ready))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        probes = self._probes
        if probes is None:
            return
        yield gauge_family(SCHEDULER_OWNED_PARTITIONS, [((), len(probes.owned()))])
        yield gauge_family(SCHEDULER_FOLLOWERS_PENDING,
                           [((), probes.calendar_followers_pending())])
        yield gauge_family(SCHEDULER_IN_FLIGHT,
                           [((tenant,), count)
                            for tenant, count in top_tenants(probes.in_flight_by_tenant())])
