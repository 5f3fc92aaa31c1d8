"""Invariants and start lag while Kafka brokers die (issue 15, item 6): on the session's
3-node cluster (topics at replication factor 3, min.insync.replicas 2), two schedulers, two
workers, the api and the history projector run jobs firing every second. The broker that
leads the most inbox partitions among those coordinating a scheduler's transactions is
killed with -9, kept down 30 s and restarted; then, once every replica is back in sync,
the controller quorum's active leader is killed with -9 and restarted. From the committed
log: no fire time scheduled twice or missing, one terminal state per attempt, every run
executed, and the start lag p99 of the runs due while a broker was down at most 5 s."""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.stack.cluster_view import ClusterView
from cronlog_dev.stack.kafka_cluster import KafkaCluster
from tests.chaos.cluster import Cluster, EventTopics
from tests.chaos.log_audit import audit, describe, verified
from tests.chaos.service import (
    chaos_settings,
    create_jobs,
    every_second_spec,
    restart_dead_nodes,
    serving_channel,
    wait_window_finished,
)
from tests.chaos.start_lag import Window, lag_table, run_starts, window_lags
from tests.conftest import ROOT
from tests.support.polling import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.measured]  # asserts start-lag p99s

JOBS = int(os.environ.get("CRONLOG_CHAOS_CLUSTER_JOBS", "100"))
PARTITIONS = 8
SCHEDULERS = ("scheduler-1", "scheduler-2")
WORKERS = ("worker-1", "worker-2")
# Seconds from the first fire time. The broker is down from KILL_BROKER_S to
# RESTART_BROKER_S (the 30 s); the controller is killed at KILL_CONTROLLER_S, or
# later once the restarted broker's replicas are in sync again (killing it before would
# leave partitions below min.insync.replicas: an outage of the test's making), and is down
# CONTROLLER_DOWN_S; the last fire time is SECONDS. Killed 4 s after the broker was back
# (at 62 s, in sync) instead of 80, an owner's transaction hung 25 s once (librdkafka's
# send_offsets_to_transaction past its timeout; owner_transaction.TRANSACTION_DEADLINE).
SETTLE_S = 3
KILL_BROKER_S = 15
RESTART_BROKER_S = KILL_BROKER_S + 30
KILL_CONTROLLER_S = 80
CONTROLLER_DOWN_S = 15
SECONDS = 120
IN_SYNC_WAIT_S = 20
LAG_BOUND_MS = 5_000  # issue 15: p99 start lag of the runs due while a broker is down


@dataclass
class _Moment:
    label: str
    at: datetime


@pytest.fixture
def cluster_settings(kafka_cluster: KafkaCluster, stack_settings: Settings) -> Iterator[Settings]:
    """Isolated settings whose Kafka is the session's 3-node cluster, whole again after."""
    restart_dead_nodes(kafka_cluster)
    settings = chaos_settings(
        stack_settings, kafka_bootstrap=kafka_cluster.bootstrap, topic_replication_factor=3,
        topic_min_insync_replicas=2, partitions=PARTITIONS)
    yield settings
    restart_dead_nodes(kafka_cluster)


def test_firing_goes_on_while_brokers_die(kafka_cluster: KafkaCluster,
                                          cluster_settings: Settings) -> None:
    began = time.monotonic()
    settings = cluster_settings
    view = ClusterView(kafka_cluster.bootstrap)
    inbox = view.partitions(settings.inbox_topic)
    assert all(len(p.replicas) == 3 for p in inbox), f"inbox not at RF 3: {inbox}"
    run_dir = ROOT / ".cronlog" / "chaos-cluster" / uuid.uuid4().hex[:6]
    (run_dir / "records").mkdir(parents=True)
    cluster = Cluster(settings, run_dir / "logs", run_dir / "records")
    follower = EventTopics(settings)
    moments: list[_Moment] = []
    try:
        cluster.start_all("api", "projector", *SCHEDULERS, *WORKERS)
        channel = serving_channel(cluster, 120)
        # Every job exists before its first fire time, so all its fire times are expected;
        # on RF 3 a command waits for two replicas, on a loaded machine that is slow.
        start = (datetime.now(UTC) + timedelta(seconds=15 + JOBS // 10)).replace(microsecond=0)
        end = start + timedelta(seconds=SECONDS)
        job_ids = create_jobs(
            pb_grpc.JobServiceStub(channel), JOBS,
            lambda i: every_second_spec(f"cluster-{i}", start, end, 0.1 + (i % 3) * 0.1), start)
        expected = {j: [start + timedelta(seconds=s) for s in range(SECONDS + 1)]
                    for j in job_ids}
        print(f"\ncluster failover: {JOBS} jobs every second over {PARTITIONS} partitions on "
              f"brokers {kafka_cluster.bootstrap}, fire times {start:%H:%M:%S}-{end:%H:%M:%S};"
              f" logs in {run_dir}")
        _faults(kafka_cluster, view, settings, start, moments)
        wait_window_finished(follower, expected, cluster, end, 180, "cluster failover")
    finally:
        cluster.stop()
    events = follower.follow()
    result = audit(events, expected, cluster.executions())
    windows = _windows(start, end, moments)
    per_window = window_lags(run_starts(events), windows)
    print("\nstart lag of the runs due in each window (first attempt start - fire time):")
    print(lag_table(per_window))
    print(result.summary())
    print(f"wall time {time.monotonic() - began:.0f}s")
    assert result.runs_scheduled == JOBS * (SECONDS + 1)
    assert not any(result.violations.values()), result.summary()
    # cronlog verify's proof over the same log, from each job's own events.
    proof = verified(events, start, end + timedelta(seconds=1))
    print(describe(proof))
    assert proof.holds, describe(proof)
    assert proof.tally.fire_times + proof.tally.missed_fire_times == result.runs_scheduled
    for row, window in zip(per_window, windows, strict=True):
        if row.kind == "broker down":
            assert row.within(LAG_BOUND_MS), (
                f"{row.label}: p99 {row.lag.p99_ms} ms > {LAG_BOUND_MS} ms "
                f"({row.not_started} not started); the schedulers meanwhile:\n"
                + "\n".join(_owner_lines(cluster, window)))


def _faults(kafka: KafkaCluster, view: ClusterView, settings: Settings, start: datetime,
            moments: list[_Moment]) -> None:
    def at(seconds: float, action: Callable[[], str]) -> None:
        when = start + timedelta(seconds=seconds)
        while datetime.now(UTC) < when:
            time.sleep(0.05)
        label = action()
        moments.append(_Moment(label, datetime.now(UTC)))
        print(f"+{(datetime.now(UTC) - start).total_seconds():5.1f}s {label}")

    victim: list[int] = []

    def kill_busiest() -> str:
        node, why = _busiest_coordinator(view, settings)
        victim.append(node)
        kafka.kill(node)
        return f"killed broker {node} ({why})"

    def restart(node: Callable[[], int]) -> Callable[[], str]:
        def go() -> str:
            began = time.monotonic()
            kafka.restart(node())
            return f"broker {node()} back, serving after {time.monotonic() - began:.1f}s"
        return go

    def kill_controller() -> str:
        began = time.monotonic()
        topics = (settings.inbox_topic, settings.job_events_topic, settings.run_events_topic,
                  "__transaction_state", "__consumer_offsets")
        wait_for(lambda: all(view.fully_replicated(t) for t in topics), IN_SYNC_WAIT_S,
                 "every replica back in sync before the controller's kill", interval=0.5)
        leader = kafka.active_controller()
        victim.append(leader)
        kafka.kill(leader)
        return (f"killed broker {leader} (the active controller; replicas in sync after "
                f"{time.monotonic() - began:.1f}s)")

    at(KILL_BROKER_S, kill_busiest)
    at(RESTART_BROKER_S, restart(lambda: victim[0]))
    at(KILL_CONTROLLER_S, kill_controller)
    killed = (moments[-1].at - start).total_seconds()
    at(killed + CONTROLLER_DOWN_S, restart(lambda: victim[1]))
    # The new controller fences the dead one and a new quorum leader is chosen; which one:
    print(f"quorum after: leader {kafka.quorum().leader}, epoch {kafka.quorum().epoch}")


def _busiest_coordinator(view: ClusterView, settings: Settings) -> tuple[int, str]:
    """The broker coordinating at least one scheduler's transactions that leads the most
    inbox partitions."""
    leaders = view.leader_counts(settings.inbox_topic)
    coordinates: dict[int, list[str]] = {}
    for name in SCHEDULERS:
        # owner_transport names the owner's transactional producer so.
        broker = view.transaction_coordinator(f"{settings.group_prefix}-owner-{name}")
        coordinates.setdefault(broker, []).append(name)
    node = max(coordinates, key=lambda b: (leaders[b], b))
    return node, (f"leads {leaders[node]} of {PARTITIONS} inbox partitions, coordinates "
                  f"{', '.join(coordinates[node])}; inbox leaders {dict(sorted(leaders.items()))}")


# What a scheduler logs about a cycle that waited on Kafka.
_OWNER_LINE = re.compile(r"owner transaction|not committed|longest \d+ ms to its commit")


def _owner_lines(cluster: Cluster, window: Window) -> list[str]:
    """The schedulers' lines on their transactions from the window and 15 s after it (a
    failed window's message says where its time went)."""
    until = window.end + timedelta(seconds=15)
    found = []
    for name in SCHEDULERS:
        for line in cluster.log_text(name).splitlines():
            try:
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            except ValueError:
                continue
            if window.start <= at <= until and (match := _OWNER_LINE.search(line)):
                # A cycle summary's own figures come after its counts.
                shown = line[match.start():] if match.group().startswith("longest") else line
                found.append(f"{name} {line[11:23]}: {shown[:300]}")
    return found


def _windows(start: datetime, end: datetime, moments: list[_Moment]) -> list[Window]:
    kill_broker, broker_back, kill_controller, controller_back = moments
    after = end + timedelta(seconds=1)
    return [
        Window("baseline", "baseline (every broker up)",
               start + timedelta(seconds=SETTLE_S), kill_broker.at),
        Window("broker down", kill_broker.label + ", until back", kill_broker.at,
               broker_back.at),
        Window("after", "after it came back", broker_back.at, kill_controller.at),
        Window("broker down", kill_controller.label + ", until back", kill_controller.at,
               controller_back.at),
        Window("after", "after the controller came back", controller_back.at, after),
    ]
