"""What every chaos run does around its faults: settings of its own, wait for the spawned api,
create the jobs that fire every second through the window, and wait until every run of the
window finished."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import grpc

from cronlog.infra.config import Settings
from cronlog.infra.provision import provision
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.stack.kafka_cluster import KafkaCluster
from tests.chaos.cluster import Cluster, EventTopics
from tests.chaos.log_audit import audit
from tests.conftest import make_isolated
from tests.e2e.conftest import free_port
from tests.support.api_ready import wait_for_api
from tests.support.polling import TimedOut, wait_for


def chaos_settings(stack_settings: Settings, **overrides: object) -> Settings:
    """Isolated, provisioned settings whose workers run the recording handler. provision
    also makes the Postgres rows of every partition: a run may use more than make_isolated
    made for the shared stack."""
    base = make_isolated(stack_settings)
    assert isinstance(base, Settings)
    settings = base.with_overrides(
        grpc_address=f"127.0.0.1:{free_port()}", heartbeat_interval=timedelta(seconds=1),
        handler_modules=("tests.chaos.recording_handler",), worker_slots=32, **overrides)
    provision(settings)
    return settings


def restart_dead_nodes(kafka_cluster: KafkaCluster) -> None:
    """Every node of the session's cluster up again (a test before may have left one down)."""
    for node_id in set(kafka_cluster.nodes) - set(kafka_cluster.running()):
        kafka_cluster.restart(node_id)


def serving_channel(cluster: Cluster, seconds: float) -> grpc.Channel:
    """A channel to the cluster's api once its health check says SERVING."""
    channel = grpc.insecure_channel(cluster.settings.grpc_address)
    wait_for_api(channel, seconds, cluster.exited_early)
    return channel


def answering_stub(cluster: Cluster) -> pb_grpc.JobServiceStub:
    """A stub for the cluster's api once it answers a query."""
    channel = grpc.insecure_channel(cluster.settings.grpc_address)
    grpc.channel_ready_future(channel).result(timeout=60)
    stub = pb_grpc.JobServiceStub(channel)
    wait_for(lambda: _answers(stub), 60, "api answering")
    return stub


def _answers(stub: pb_grpc.JobServiceStub) -> bool:
    try:
        stub.ListJobs(pb.ListJobsRequest(tenant="none"), timeout=5)
        return True
    except grpc.RpcError:
        return False


def create_jobs(stub: pb_grpc.JobServiceStub, count: int, spec: Callable[[int], pb.JobSpec],
                start: datetime, timeout: float = 30) -> list[str]:
    """Creates spec(0) .. spec(count - 1), eight at a time; each must exist before its first
    fire time `start`, so that all its fire times are expected."""
    def create(i: int) -> str:
        job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid4()), spec=spec(i)),
                             timeout=timeout).job
        assert created_in_time(job, start), (
            f"job {i} created after its first fire time {start:%H:%M:%S}")
        return str(job.job_id)

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(create, range(count)))


def created_in_time(job: pb.Job, start: datetime) -> bool:
    """Whether a job just answered was created before its first fire time `start`. Its
    next fire time may be past `start` already: a fire time within the lookahead (8 s by
    default) is fired, and the job's next fire time moved on, as soon as the job exists,
    possibly in the very cycle that created it, before the api reads the job back."""
    return (datetime.now(UTC) < start
            or job.next_fire_at.ToDatetime(tzinfo=UTC) == start)


def wait_window_finished(follower: EventTopics, expected: Mapping[str, list[datetime]],
                         cluster: Cluster, end: datetime, seconds: float, label: str) -> None:
    """Until the window has ended, every expected fire time is scheduled and every run has
    finished: late is allowed (a partition waits for a new owner), lost is not. On time out
    it prints what is still missing and which processes died."""
    def quiet() -> str | None:
        if datetime.now(UTC) <= end:
            return None
        return None if audit(follower.follow(), expected, []).waiting_for() else "quiet"
    try:
        wait_for(quiet, seconds, "every run of the window finished", interval=3)
    except TimedOut:
        so_far = audit(follower.follow(), expected, cluster.executions())
        print(f"\n{label} timed out; still waiting for: {so_far.waiting_for()}")
        print(so_far.summary())
        print(f"dead processes: {cluster.dead()}")
        raise


def every_second_spec(name: str, start: datetime, end: datetime,
                      seconds: float) -> pb.JobSpec:
    """A job firing every second from start to end whose handler runs `seconds`. RUN_ALL:
    every fire time must run, however late the faults make it."""
    spec = pb.JobSpec(name=name, tenant="chaos", handler="record",
                      cron="* * * * * *", time_zone="Europe/Berlin",
                      misfire_policy=pb.MISFIRE_POLICY_RUN_ALL,
                      payload=json.dumps({"seconds": seconds}).encode())
    spec.start_at.FromDatetime(start)
    spec.end_at.FromDatetime(end)
    spec.heartbeat_timeout.FromSeconds(4)
    spec.timeout.FromSeconds(30)
    spec.retry_policy.max_attempts = 20
    spec.retry_policy.initial_backoff.FromMilliseconds(200)
    spec.retry_policy.max_backoff.FromSeconds(2)
    return spec
