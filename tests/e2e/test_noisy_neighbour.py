"""A noisy neighbour: tenant B throws everything issue 13 lists at the service while tenant
A's every-second canary keeps running on time, every fire time once, no process exits, and B
never sees A's data (DESIGN invariants 9 and 10)."""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import grpc
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

# Asserts timing: make test runs it alone (scripts/test-suites.sh).
pytestmark = [pytest.mark.e2e, pytest.mark.measured]

A_TOKEN, B_TOKEN = "a-" + uuid.uuid4().hex, "b-" + uuid.uuid4().hex
A = (("authorization", f"Bearer {A_TOKEN}"),)
B = (("authorization", f"Bearer {B_TOKEN}"),)
BIG = b"x" * (64 * 1024)


def ts(value: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(value)
    return out


def seconds(value: float) -> Duration:
    out = Duration()
    out.FromTimedelta(timedelta(seconds=value))
    return out


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


SERVICE_ENV = {"CRONLOG_TENANT_TOKENS": f"a={A_TOKEN},b={B_TOKEN}"}
SERVICE_OVERRIDES = dict(
    # A declared queue nobody serves: its runs must be lost within the start timeout.
    queues=("default", "unserved"), worker_queues=("default",),
    shared_queues=("default", "unserved"),
    start_timeout=timedelta(seconds=5), catch_up_window=timedelta(seconds=3))


def create(stub: pb_grpc.JobServiceStub, metadata: Any, request_id: str | None = None,
           **fields: Any) -> pb.Job:
    spec = pb.JobSpec(**{"name": "job", "handler": "echo", **fields})
    return stub.CreateJob(pb.CreateJobRequest(request_id=request_id or rid(), spec=spec),
                          timeout=30, metadata=metadata).job


def runs_of(stub: pb_grpc.JobServiceStub, job_id: str, metadata: Any) -> list[pb.Run]:
    runs: list[pb.Run] = []
    token = ""
    while True:
        page = stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=1000,
                                                page_token=token),
                             timeout=30, metadata=metadata)
        runs.extend(page.runs)
        token = page.next_page_token
        if not token:
            return runs


def hostile_requests(stub: pb_grpc.JobServiceStub, a_job: pb.Job, a_request: str,
                     service: RunningService) -> dict[str, Any]:
    """Everything B does; returns what the checks afterwards need."""
    now = datetime.now(UTC)
    bad = {
        "far-future start_at": dict(tenant="b", cron="* * * * *",
                                    start_at=ts(datetime(9999, 12, 31, tzinfo=UTC))),
        "pre-1970 at": dict(tenant="b", at=ts(datetime(1969, 7, 20, tzinfo=UTC))),
        "huge backoff": dict(tenant="b", cron="* * * * *", retry_policy=pb.RetryPolicy(
            max_attempts=5, initial_backoff=seconds(10**9), max_backoff=seconds(10**10))),
        "huge timeout": dict(tenant="b", cron="* * * * *", timeout=seconds(10**11)),
        "never fires": dict(tenant="b", cron="0 0 31 2 *"),
        "undeclared queue": dict(tenant="b", cron="* * * * *", queue="made-up-" + rid()[:8]),
    }
    for what, fields in bad.items():
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        assert code_of(lambda f=fields: create(stub, B, **f)) == (  # type: ignore[misc]
            grpc.StatusCode.INVALID_ARGUMENT), what
    # Reusing the request id A created its canary with is B's own request: B's job is paused
    # for real.
    b_job = create(stub, B, tenant="b", cron="0 0 1 1 *")
    paused = stub.PauseJob(pb.PauseJobRequest(request_id=a_request, job_id=b_job.job_id),
                           timeout=30, metadata=B).job
    assert paused.status == pb.JOB_STATUS_PAUSED
    # The same id with another request on the same job is refused, never an OK that did nothing.
    assert code_of(lambda: stub.ResumeJob(pb.ResumeJobRequest(
        request_id=a_request, job_id=b_job.job_id), timeout=30, metadata=B)) in (
        grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS)
    # Large outputs in a burst: 120 backfilled runs each echoing 64 KiB.
    big = create(stub, B, tenant="b", cron="* * * * * *", payload=BIG)
    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=big.job_id), timeout=30,
                  metadata=B)
    # `from` is a Python keyword: the stubs leave the field out of __init__, so it goes in by **.
    burst = stub.BackfillJob(pb.BackfillJobRequest(
        request_id=rid(), job_id=big.job_id,
        **cast("dict[str, Any]", {"from": ts(now - timedelta(seconds=150))}),
        until=ts(now - timedelta(seconds=31))), timeout=30, metadata=B).run_ids
    # Mass pause and resume of every-second jobs, resumed after more than the catch-up window.
    many = [create(stub, B, tenant="b", name=f"many-{i}", cron="* * * * * *").job_id
            for i in range(20)]
    for job_id in many:
        stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job_id), timeout=30,
                      metadata=B)
    # http to the stack's own ClickHouse: refused by the worker's outbound fence.
    settings: Any = service.settings
    http = create(stub, B, tenant="b", handler="http", at=ts(now + timedelta(seconds=2)),
                  payload=(b'{"url": "http://127.0.0.1:%d/?query=SELECT%%201", "body": ""}'
                           % settings.clickhouse_port))
    # Retries that are deleted before they start.
    retrying = create(stub, B, tenant="b", handler="fail", payload=b'{"times": 5}',
                      at=ts(now + timedelta(seconds=1)), retry_policy=pb.RetryPolicy(
                          max_attempts=5, initial_backoff=seconds(30), max_backoff=seconds(30)))
    # A queue nobody serves: its run is lost after the start timeout, not stuck SCHEDULED.
    unserved = create(stub, B, tenant="b", queue="unserved", at=ts(now + timedelta(seconds=1)),
                      retry_policy=pb.RetryPolicy(max_attempts=1))
    # Bytes no codec reads, straight onto the inbox and the run-events topic.
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for topic in (settings.inbox_topic, settings.run_events_topic):
        for partition in range(settings.partitions):
            producer.produce(topic, key=b"junk", value=b"\xc3\x01not avro at all",
                             partition=partition)
    producer.flush(30)
    return {"many": many, "burst": burst, "big": big.job_id, "http": http.job_id,
            "retrying": retrying.job_id, "unserved": unserved.job_id}


def test_a_noisy_neighbour_cannot_stop_stall_or_read_another_tenant(
        service: RunningService, stub: pb_grpc.JobServiceStub) -> None:
    a_request = rid()
    canary = create(stub, A, request_id=a_request, tenant="a", name="canary",
                    cron="* * * * * *")
    window_start = datetime.now(UTC) + timedelta(seconds=3)
    b = hostile_requests(stub, canary, a_request, service)

    def failed_attempt(job_id: str) -> pb.Run | None:
        runs = runs_of(stub, job_id, B)
        return next((r for r in runs if r.attempts and r.attempts[0].error), None)

    retry_run = wait_for(lambda: failed_attempt(b["retrying"]), 60, "first failed attempt")
    stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=b["retrying"]), timeout=30,
                   metadata=B)
    wait_for(lambda: b_all_resumed(stub, b["many"]), 60, "B's every-second jobs resumed")
    http_run = wait_for(lambda: failed_attempt(b["http"]), 60, "the http run's attempt")
    assert "not allowed" in http_run.attempts[0].error
    window_end = datetime.now(UTC) + timedelta(seconds=15)
    wait_for(lambda: datetime.now(UTC) > window_end + timedelta(seconds=5), 60,
             "the canary window")

    for role, process in service.processes.items():
        assert process.poll() is None, f"{role} exited"

    # The canary: every fire time of the window ran once, p99 start lag under 2 s.
    def canary_window() -> list[pb.Run] | None:
        runs = [r for r in runs_of(stub, canary.job_id, A)
                if window_start <= r.scheduled_at.ToDatetime(tzinfo=UTC) <= window_end]
        done = [r for r in runs if r.status == pb.RUN_STATUS_SUCCEEDED]
        return runs if len(done) >= int((window_end - window_start).total_seconds()) else None

    runs = wait_for(canary_window, 60, "the canary's runs of the window in history")
    fire_times = [r.scheduled_at.ToDatetime(tzinfo=UTC) for r in runs]
    assert len(fire_times) == len(set(fire_times)), "a fire time ran twice"
    expected = int((window_end - window_start).total_seconds())
    assert len(fire_times) >= expected, f"{len(fire_times)} of {expected} fire times"
    lags = sorted(r.start_lag.ToTimedelta().total_seconds() for r in runs)
    p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))]
    assert p99 <= 2.0, f"canary p99 start lag {p99:.2f}s (median {statistics.median(lags)})"

    # B's burst of large outputs all recorded; nothing stuck.
    def burst_done() -> bool:
        statuses = {r.run_id: r.status for r in runs_of(stub, b["big"], B)}
        return all(statuses.get(run_id) == pb.RUN_STATUS_SUCCEEDED for run_id in b["burst"])

    wait_for(burst_done, 90, "every run of the 64 KiB burst succeeded")
    # The deleted job's waiting retry was cancelled, not run.
    final = stub.GetRun(pb.GetRunRequest(run_id=retry_run.run_id), timeout=30, metadata=B).run
    assert final.status == pb.RUN_STATUS_CANCELLED, final
    # The unserved queue's run ended (lost, then out of attempts) instead of waiting for ever.
    wait_for(lambda: any(r.status == pb.RUN_STATUS_DEAD_LETTERED
                         for r in runs_of(stub, b["unserved"], B)), 60,
             "the unserved queue's run dead-lettered")

    # The junk was set aside, on the poison topic and in rejected_events, not skipped silently.
    settings: Any = service.settings
    wait_for(lambda: len(poison_records(settings)) >= settings.partitions, 60,
             "every inbox partition's junk on the poison topic")
    wait_for(lambda: rejected_events(settings) >= settings.partitions, 60,
             "every run-events partition's junk in rejected_events")

    # B never sees A's data.
    assert code_of(lambda: stub.GetJob(pb.GetJobRequest(job_id=canary.job_id), timeout=30,
                                       metadata=B)) == grpc.StatusCode.NOT_FOUND
    assert code_of(lambda: stub.GetRun(pb.GetRunRequest(run_id=runs[0].run_id), timeout=30,
                                       metadata=B)) == grpc.StatusCode.NOT_FOUND
    listed = stub.ListRuns(pb.ListRunsRequest(page_size=1000), timeout=30, metadata=B).runs
    assert listed and all(r.tenant == "b" for r in listed)
    jobs = stub.ListJobs(pb.ListJobsRequest(page_size=1000), timeout=30, metadata=B).jobs
    assert jobs and all(j.spec.tenant == "b" for j in jobs)


def b_all_resumed(stub: pb_grpc.JobServiceStub, job_ids: list[str]) -> bool:
    """Resumes B's paused every-second jobs once the catch-up window has passed since."""
    for job_id in job_ids:
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=30, metadata=B).job
        if job.status == pb.JOB_STATUS_PAUSED:
            if datetime.now(UTC) - job.updated_at.ToDatetime(tzinfo=UTC) < timedelta(seconds=8):
                return False
            stub.ResumeJob(pb.ResumeJobRequest(request_id=rid(), job_id=job_id), timeout=30,
                           metadata=B)
    return True


def poison_records(settings: Any) -> list[bytes | None]:
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap,
                         "group.id": "noisy-" + rid(), "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(settings.poison_topic, p, OFFSET_BEGINNING)
                         for p in range(settings.partitions)])
        found: list[bytes | None] = []
        while batch := consumer.consume(num_messages=500, timeout=2):
            found += [m.value() for m in batch if m.error() is None]
        return found
    finally:
        consumer.close()


def rejected_events(settings: Any) -> int:
    from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory

    history = ClickHouseRunHistory(settings.clickhouse_host, settings.clickhouse_port,
                                   settings.clickhouse_database, settings.clickhouse_user,
                                   settings.clickhouse_password)
    [(count,)] = history.execute(
        f"SELECT count() FROM {settings.clickhouse_database}.rejected_events")
    return int(count)
