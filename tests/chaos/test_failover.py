"""Invariants 1-6 under failures: 3 schedulers and 3 workers against the real stack while
jobs fire every second; a scheduler is killed, another is frozen past its session timeout
and thawed (a zombie), a worker is killed mid-run, the Kafka broker and Postgres restart.
Then the committed event log is audited. `make test` runs it briefly; `make chaos` runs it
for CRONLOG_CHAOS_SECONDS."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from cronlog.infra.config import Settings
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.stack.local_stack import LocalStack
from tests.chaos.cluster import Cluster, EventTopics
from tests.chaos.dependency_audit import audit_dependencies
from tests.chaos.log_audit import audit, describe, verified
from tests.chaos.service import (
    answering_stub,
    chaos_settings,
    created_in_time,
    every_second_spec,
    wait_window_finished,
)
from tests.conftest import ROOT
from tests.support.polling import wait_for

pytestmark = pytest.mark.chaos

SECONDS = int(os.environ.get("CRONLOG_CHAOS_SECONDS", "45"))
JOBS = int(os.environ.get("CRONLOG_CHAOS_JOBS", "200"))
SESSION_TIMEOUT = 10  # the schedulers' consumer session timeout
# Jobs that run after one chaos job each, and one after two (a fan-in): their upstreams'
# owners send the run ends across partitions, through the same faults (issue 16).
DEPENDENTS = int(os.environ.get("CRONLOG_CHAOS_DEPENDENTS", "20"))


def create_jobs(stub: pb_grpc.JobServiceStub, start: datetime, end: datetime) -> list[str]:
    from concurrent.futures import ThreadPoolExecutor

    def create(i: int) -> str:
        spec = every_second_spec(f"chaos-{i}", start, end, 0.2 + (i % 5) * 0.2)
        request = pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec)
        for attempt in range(5):
            try:
                job = stub.CreateJob(request, timeout=60).job
                break
            except grpc.RpcError as exc:
                # A client retries an unanswered command with the same request id.
                if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt == 4:
                    raise
        # Every job exists before the window opens, so all its fire times are expected.
        assert created_in_time(job, start), "created too late"
        return str(job.job_id)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(create, range(JOBS)))


def test_no_double_fire_and_no_missed_run_under_failures(local_stack: LocalStack | None,
                                                         stack_settings: Settings) -> None:
    if local_stack is None:
        pytest.skip("restarts servers, so it needs the servers this session started")
    tag = uuid.uuid4().hex[:6]
    settings = chaos_settings(stack_settings)
    run_dir = ROOT / ".cronlog" / "chaos" / tag
    (run_dir / "records").mkdir(parents=True)
    cluster = Cluster(settings, run_dir / "logs", run_dir / "records")
    try:
        cluster.start_all("api", "scheduler-1", "worker-1", "scheduler-2", "worker-2",
                          "scheduler-3", "worker-3")
        stub = answering_stub(cluster)
        lead = timedelta(seconds=20 + JOBS // 10)
        start = (datetime.now(UTC) + lead).replace(microsecond=0)
        end = start + timedelta(seconds=SECONDS)
        job_ids = create_jobs(stub, start, end)
        expected = {j: [start + timedelta(seconds=s) for s in range(SECONDS + 1)]
                    for j in job_ids}
        follower = EventTopics(settings)
        dependents = create_dependents(stub, follower, job_ids, settings.partitions, start)
        zombie_woke = _run_faults(cluster, local_stack, start)
        wait_window_finished(follower, expected, cluster, end, SECONDS + 240, "chaos")
        wait_for(lambda: not audit_dependencies(follower.follow(), dependents).missing, 60,
                 "every dependent run made")
        wait_window_finished(follower, expected, cluster, end, 120, "chaos dependents")
    finally:
        cluster.stop()
    events = follower.follow()
    result = audit(events, expected, cluster.executions())
    dependency_result = audit_dependencies(events, dependents)
    zombie_rejections = cluster.log_text("scheduler-2").count("cycle not committed")
    print(f"\nchaos: {JOBS} jobs x {SECONDS + 1} fire times, faults from {start:%H:%M:%S}")
    print(result.summary())
    print(f"zombie transactions rejected after it woke at {zombie_woke:%H:%M:%S}: "
          f"{zombie_rejections}")
    print(dependency_result.summary())
    # cronlog verify's proof over the same log, which derives the fire times from each
    # job's own events rather than from what the test expected.
    proof = verified(events, start, end + timedelta(seconds=1), "chaos")
    print(describe(proof))
    assert result.runs_scheduled == JOBS * (SECONDS + 1)
    assert not any(result.violations.values()), result.summary()
    assert proof.holds, describe(proof)
    assert proof.tally.fire_times == JOBS * (SECONDS + 1), describe(proof)
    assert result.lost_attempts > 0, "the killed worker's running attempts were marked lost"
    assert not any(dependency_result.violations.values()), dependency_result.summary()
    assert dependency_result.dependent_runs >= (DEPENDENTS + 1) * (SECONDS + 1), \
        "every upstream run succeeds in the end (RUN_ALL, 20 attempts), so each dependent runs"


def create_dependents(stub: pb_grpc.JobServiceStub, follower: EventTopics, job_ids: list[str],
                      partitions: int, start: datetime) -> dict[str, list[str]]:
    """DEPENDENTS jobs after one chaos job each and one after two, each upstream in another
    partition than its dependent where the ids allow; all linked on their upstreams' logs
    before the window opens, so every upstream run's end is followed."""
    wanted: list[list[str]] = [[u] for u in job_ids[:DEPENDENTS]]
    wanted.append(job_ids[DEPENDENTS:DEPENDENTS + 2])
    dependents: dict[str, list[str]] = {}
    crossing = 0
    for i, upstreams in enumerate(wanted):
        spec = pb.JobSpec(name=f"dependent-{i}", tenant="chaos", handler="record",
                          payload=json.dumps({"seconds": 0.1}).encode(),
                          after=pb.Dependency(job_ids=upstreams))
        spec.heartbeat_timeout.FromSeconds(4)
        spec.timeout.FromSeconds(30)
        spec.retry_policy.max_attempts = 20
        spec.retry_policy.initial_backoff.FromMilliseconds(200)
        spec.retry_policy.max_backoff.FromSeconds(2)
        job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                             timeout=60).job
        dependents[job.job_id] = upstreams
        crossing += any(partition_for(u, partitions) != partition_for(job.job_id, partitions)
                        for u in upstreams)
    links = sum(len(u) for u in wanted)
    wait_for(lambda: sum(1 for name, _ in follower.follow() if name == "JobDependentLinked")
             >= links, 30, "every dependent linked on its upstream's log")
    assert datetime.now(UTC) < start, "dependents linked after the window opened"
    assert crossing > len(wanted) // 2, f"only {crossing} dependents cross partitions"
    print(f"\n{len(wanted)} dependents ({crossing} across partitions), linked")
    return dependents


def _kill_a_busy_worker(cluster: Cluster) -> str:
    """Kills -9 a worker that is running attempts whose start it has surely reported, so the
    owners must notice the silence and mark them lost. Which worker is busy depends on
    which job partitions its dispatch partitions carry and on which owners are down."""
    def busy() -> str | None:
        # A start is reported as the handler begins; half a second covers the producer's
        # linger many times over.
        before = time.time() - 0.5
        counts = {n: cluster.running_since(n, before)
                  for n in ("worker-1", "worker-2", "worker-3")}
        name, count = max(counts.items(), key=lambda item: item[1])
        return name if count else None
    name = wait_for(busy, 20, "a worker mid-run", interval=0.05)
    cluster.signal(name, signal.SIGKILL)
    print(f"\nkilled {name} while it ran attempts")
    return name


def _run_faults(cluster: Cluster, stack: LocalStack, start: datetime) -> datetime:
    """Runs the fault timeline, spread over the window; returns when the zombie woke."""
    def at(fraction: float) -> None:
        when = start + timedelta(seconds=SECONDS * fraction)
        while datetime.now(UTC) < when:
            time.sleep(0.1)

    victim: list[str] = []
    steps: list[tuple[float, Callable[[], None]]] = [
        (0.10, lambda: cluster.signal("scheduler-1", signal.SIGKILL)),
        (0.20, lambda: cluster.restart("scheduler-1")),
        (0.25, lambda: cluster.signal("scheduler-2", signal.SIGSTOP)),
        (0.30, lambda: victim.append(_kill_a_busy_worker(cluster))),
        (0.40, lambda: cluster.restart(victim[0])),
    ]
    woke = datetime.now(UTC)
    for fraction, action in steps:
        at(fraction)
        action()
    # The zombie wakes once the group has surely given its partitions away.
    frozen_until = start + timedelta(seconds=SECONDS * 0.25 + SESSION_TIMEOUT + 5)
    while datetime.now(UTC) < frozen_until:
        time.sleep(0.1)
    cluster.signal("scheduler-2", signal.SIGCONT)
    woke = datetime.now(UTC)
    at(0.60)
    stack.kafka.stop()
    stack.kafka.start()
    at(0.80)
    stack.postgres.stop()
    stack.postgres.start()
    return woke
