"""The scheduler role's exported numbers and readiness, from the owner's figures, probes,
librdkafka's statistics (their JSON) and a Postgres question (a function here)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from cronlog.commands.owner.ports import CycleFigures, CycleTally
from cronlog.infra.observability.catalogue import (
    IN_FLIGHT_TOP_TENANTS,
    SCHEDULER_START_LEAD,
)
from cronlog.infra.observability.registry import RoleMetrics
from cronlog.infra.observability.scheduler import (
    INBOX_CLIENT,
    LeadHistogram,
    OwnerProbes,
    PostgresCheck,
    SchedulerMetrics,
    SchedulerObservation,
    top_tenants,
)
from tests.support.clock import FakeClock
from tests.support.kafka_statistics import statistics


class Postgres:
    def __init__(self) -> None:
        self.asked = 0
        self.down = False

    def __call__(self) -> None:
        self.asked += 1
        if self.down:
            raise OSError("connection refused")


class Owner:
    def __init__(self) -> None:
        self.assigned: frozenset[int] | None = None
        self.owned: frozenset[int] = frozenset()
        self.resyncing = False
        self.in_flight: Counter[str] = Counter()
        self.followers_pending = 0

    def probes(self) -> OwnerProbes:
        return OwnerProbes(lambda: self.assigned, lambda: self.owned, lambda: self.resyncing,
                           lambda: Counter(self.in_flight), lambda: self.followers_pending)


def observed(clock: FakeClock, postgres: Postgres) -> SchedulerObservation:
    return SchedulerObservation(PostgresCheck(postgres, every=5.0, monotonic=clock),
                                RoleMetrics("scheduler", default_collectors=False), clock)


def figures(tally: CycleTally, commit: float | None = 0.02) -> CycleFigures:
    return CycleFigures(0.05, commit, 7, 2.5, tally)


def test_a_cycles_figures_become_the_scheduler_series() -> None:
    observation = observed(FakeClock(seconds=100.0), Postgres())
    tally = CycleTally(events=12, set_aside=1)
    tally.runs.update({("created", "a"): 5, ("missed", "a"): 2, ("skipped", "b"): 1,
                       ("dead_lettered", "a"): 1, ("failed", "a"): 1, ("succeeded", "b"): 3})
    tally.leads = {"a": [1.9, 0.3, -0.5], "b": [2.0]}
    tally.refused["FAILED_PRECONDITION"] = 2
    told = observation.owner_metrics
    told.cycle(figures(tally))
    told.cycle(figures(CycleTally(), commit=None))
    told.partitions_claimed(3)
    told.caught_up(3, 1.5)
    registry = observation.metrics.registry
    value = registry.get_sample_value
    assert value("cronlog_scheduler_cycle_duration_seconds_count") == 2
    assert value("cronlog_scheduler_commit_duration_seconds_count") == 1, \
        "a cycle without a transaction has no commit time"
    assert value("cronlog_scheduler_cycle_messages_sum") == 14
    assert value("cronlog_scheduler_cycle_events_sum") == 12
    assert value("cronlog_scheduler_lookahead_seconds") == 2.5
    assert value("cronlog_scheduler_runs_created_total", {"queue": "a"}) == 5
    assert value("cronlog_scheduler_runs_missed_total", {"queue": "a"}) == 2
    assert value("cronlog_scheduler_runs_skipped_total", {"queue": "b"}) == 1
    assert value("cronlog_scheduler_runs_dead_lettered_total", {"queue": "a"}) == 1
    assert value("cronlog_scheduler_runs_finished_total", {"queue": "a", "status": "failed"}) == 1
    assert value("cronlog_scheduler_runs_finished_total",
                 {"queue": "b", "status": "succeeded"}) == 3
    assert value("cronlog_scheduler_messages_set_aside_total") == 1
    assert value("cronlog_scheduler_commands_rejected_total",
                 {"code": "FAILED_PRECONDITION"}) == 2
    assert value("cronlog_scheduler_takeovers_total") == 3
    assert value("cronlog_scheduler_catch_up_duration_seconds_count") == 3
    assert value("cronlog_scheduler_start_lead_seconds_count", {"queue": "a"}) == 3
    assert value("cronlog_scheduler_start_lead_seconds_bucket", {"queue": "a", "le": "0.0"}) == 1
    assert value("cronlog_scheduler_start_lead_seconds_bucket", {"queue": "b", "le": "2.0"}) == 1


def test_the_lead_histogram_exports_what_prometheus_clients_histogram_would() -> None:
    values = [-3.0, 0.0, 0.1, 0.25, 0.26, 1.0, 2.0, 2.5, 59.0, 60.0, 61.0, 1000.0]
    ours = CollectorRegistry()
    leads = LeadHistogram(SCHEDULER_START_LEAD)
    ours.register(leads)
    leads.observe_all("q", values[:5])
    leads.observe_all("q", values[5:])
    theirs = CollectorRegistry()
    histogram = Histogram(SCHEDULER_START_LEAD.name, SCHEDULER_START_LEAD.help, ["queue"],
                          registry=theirs, buckets=SCHEDULER_START_LEAD.buckets)
    for v in values:
        histogram.labels("q").observe(v)

    def series(registry: CollectorRegistry) -> list[str]:
        # prometheus-client adds a _created series of its own; the sum is added up in
        # another order. The rest must be alike.
        return [line for line in generate_latest(registry).decode().splitlines()
                if "_created" not in line and "_sum" not in line]

    assert series(ours) == series(theirs)
    assert ours.get_sample_value(f"{SCHEDULER_START_LEAD.name}_sum", {"queue": "q"}) == \
        pytest.approx(sum(values))


def test_in_flight_tenants_are_the_top_n_and_other() -> None:
    counts = {f"tenant-{i:02d}": i for i in range(1, 31)}
    counts["other"] = 100
    top = top_tenants(counts)
    assert len(top) == IN_FLIGHT_TOP_TENANTS + 1
    assert top[0] == ("tenant-30", 30) and top[IN_FLIGHT_TOP_TENANTS - 1] == ("tenant-11", 11)
    # Tenants 1 to 10, and the tenant itself named "other": one series.
    assert top[-1] == ("other", sum(range(1, 11)) + 100)
    assert top_tenants({}) == [("other", 0)], "the series stays while nothing is in flight"


def test_scraped_gauges_read_the_owner_and_name_at_most_the_top_tenants() -> None:
    observation = observed(FakeClock(seconds=100.0), Postgres())
    owner = Owner()
    owner.owned = frozenset({0, 2})
    owner.in_flight.update({f"t{i}": i for i in range(1, 26)})
    owner.followers_pending = 7
    observation.watch(owner.probes())
    observation.kafka.listener(INBOX_CLIENT)(statistics(lags={"0": 4}))
    text = generate_latest(observation.metrics.registry).decode()
    assert "cronlog_scheduler_owned_partitions 2.0" in text
    assert "cronlog_scheduler_calendar_followers_pending 7.0" in text
    tenants = re.findall(r'cronlog_scheduler_in_flight_runs\{tenant="([^"]+)"\}', text)
    assert len(tenants) == IN_FLIGHT_TOP_TENANTS + 1 and "other" in tenants
    assert 'cronlog_scheduler_in_flight_runs{tenant="other"} 15.0' in text  # 1 + ... + 5
    owner.followers_pending = 0
    assert "cronlog_scheduler_calendar_followers_pending 0.0" in generate_latest(
        observation.metrics.registry).decode()
    assert 'cronlog_kafka_brokers_up{client="inbox"} 1.0' in text


def test_ready_once_its_partitions_are_caught_up_with_kafka_and_postgres_reachable() -> None:
    clock, postgres = FakeClock(seconds=100.0), Postgres()
    observation = observed(clock, postgres)
    assert observation.readiness().not_ready == (
        "starting: the partition owner is not built yet",)
    owner = Owner()
    observation.watch(owner.probes())
    assert observation.readiness().not_ready == (
        "no inbox partitions assigned yet (joining the scheduler group)",
        "no Kafka statistics within 15 s (starting, Kafka unreachable, or the owner's loop "
        "stuck)")
    owner.assigned = frozenset({0, 1, 2})
    owner.owned = frozenset({1})
    observation.kafka.listener(INBOX_CLIENT)(statistics(up=False))
    assert observation.readiness().not_ready == (
        "catching up partitions 0, 2 (replaying their log before firing them)",
        "no Kafka broker reachable")
    owner.owned = frozenset({0, 1, 2})
    owner.resyncing = True
    observation.kafka.listener(INBOX_CLIENT)(statistics())
    assert observation.readiness().not_ready == (
        "re-reading state after a cycle failed (Kafka or Postgres)",)
    owner.resyncing = False
    assert observation.readiness().ready
    owner.assigned = owner.owned = frozenset()
    assert observation.readiness().ready, "a standby beyond the partition count is ready"


def test_postgres_is_asked_only_without_recent_cycles_and_at_most_every_few_seconds() -> None:
    clock, postgres = FakeClock(seconds=100.0), Postgres()
    observation = observed(clock, postgres)
    owner = Owner()
    owner.assigned = owner.owned = frozenset({0})
    observation.watch(owner.probes())
    observation.kafka.listener(INBOX_CLIENT)(statistics())
    for _ in range(10):
        assert observation.readiness().ready
    assert postgres.asked == 1, "no cycle yet: asked once, the answer kept"
    observation.owner_metrics.cycle(figures(CycleTally()))
    clock.advance(6)
    postgres.down = True
    assert observation.readiness().ready and postgres.asked == 1, \
        "a cycle 6 s ago read the due index: Postgres answered then"
    clock.advance(5)
    assert observation.readiness().not_ready == ("Postgres unreachable (OSError)",)
    assert observation.readiness().not_ready == ("Postgres unreachable (OSError)",)
    assert postgres.asked == 2
    postgres.down = False
    clock.advance(5)
    assert observation.readiness().ready and postgres.asked == 3


def test_the_declared_queues_counters_start_at_zero_so_a_first_dead_letter_alerts() -> None:
    metrics = RoleMetrics("scheduler")
    SchedulerMetrics(metrics, queues=["default", "reports"])
    value = metrics.registry.get_sample_value
    for queue in ("default", "reports"):
        assert value("cronlog_scheduler_runs_dead_lettered_total", {"queue": queue}) == 0
        assert value("cronlog_scheduler_runs_missed_total", {"queue": queue}) == 0
    assert value("cronlog_scheduler_runs_missed_total", {"queue": "other"}) is None
