"""The whole path on the real stack: a job from a gRPC request to ClickHouse history."""

from __future__ import annotations

import time
import uuid
from typing import cast

import grpc
import pytest
from clickhouse_driver import Client
from confluent_kafka import Consumer, TopicPartition

from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def _stub(service: RunningService) -> pb_grpc.JobServiceStub:
    return pb_grpc.JobServiceStub(service.channel)


def test_six_field_cron_job_in_a_non_utc_zone_runs_and_lands_in_history(
        service: RunningService) -> None:
    stub = _stub(service)
    tenant = "tenant-" + uuid.uuid4().hex[:6]
    spec = pb.JobSpec(name="every-two-seconds", tenant=tenant, handler="echo",
                      payload=b"hello", cron="*/2 * * * * *", time_zone="Asia/Kolkata")
    created = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                             timeout=30).job
    assert created.status == pb.JOB_STATUS_ACTIVE
    assert created.spec.time_zone == "Asia/Kolkata"
    assert created.next_fire_at.seconds % 2 == 0

    def three_succeeded() -> list[pb.Run] | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=created.job_id,
                                                status=pb.RUN_STATUS_SUCCEEDED), timeout=10).runs
        return list(runs) if len(runs) >= 3 else None

    runs = wait_for(three_succeeded, 60, "three succeeded runs through ListRuns")
    scheduled = [r.scheduled_at.ToDatetime() for r in runs]
    assert len(set(scheduled)) == len(scheduled), "one run per fire time"
    for run in runs:
        assert run.scheduled_at.seconds % 2 == 0
        assert run.HasField("start_lag")
        assert run.attempts[0].output == b"hello"
        assert run.idempotency_key == run.run_id
        one = stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10).run
        assert one.status == pb.RUN_STATUS_SUCCEEDED
        assert len(one.attempts) == 1

    settings = service.settings
    assert isinstance(settings, Settings)
    client = Client(settings.clickhouse_host, port=settings.clickhouse_port,
                    user=settings.clickhouse_user, password=settings.clickhouse_password)
    rows = client.execute(
        f"SELECT run_id, start_lag_us, started_at_us FROM {settings.clickhouse_database}.runs "
        "FINAL WHERE job_id = %(job)s AND run_status = 'succeeded' AND started_at_us > 0",
        {"job": created.job_id})
    assert len(rows) >= 3
    assert all(started > 0 for _, _, started in rows)
    # The lag is recorded as measured: a worker never starts a run before its time.
    assert all(lag >= 0 for _, lag, _ in rows)
    jobs = client.execute(
        f"SELECT status, time_zone, cron FROM {settings.clickhouse_database}.jobs FINAL "
        "WHERE job_id = %(job)s", {"job": created.job_id})
    assert jobs == [("active", "Asia/Kolkata", "*/2 * * * * *")]


def test_get_and_list_jobs(service: RunningService) -> None:
    stub = _stub(service)
    tenant = "tenant-" + uuid.uuid4().hex[:6]
    ids = []
    for i in range(3):
        spec = pb.JobSpec(name=f"job-{i}", tenant=tenant, handler="echo", cron="0 3 * * *",
                          time_zone="Europe/Berlin")
        ids.append(stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                                  timeout=30).job.job_id)
    job = stub.GetJob(pb.GetJobRequest(job_id=ids[0]), timeout=10).job
    assert job.spec.name == "job-0"
    first = stub.ListJobs(pb.ListJobsRequest(tenant=tenant, page_size=2), timeout=10)
    second = stub.ListJobs(pb.ListJobsRequest(tenant=tenant, page_size=2,
                                              page_token=first.next_page_token), timeout=10)
    assert [j.job_id for j in first.jobs] + [j.job_id for j in second.jobs] == ids
    assert second.next_page_token == ""


def test_retried_request_returns_the_first_outcome(service: RunningService) -> None:
    stub = _stub(service)
    request = pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=pb.JobSpec(
        name="once", tenant="t-retry-" + uuid.uuid4().hex[:6], handler="echo",
        cron="0 0 * * *"))
    first = stub.CreateJob(request, timeout=30).job
    again = stub.CreateJob(request, timeout=30).job
    assert again.job_id == first.job_id
    assert again.version == first.version
    listed = stub.ListJobs(pb.ListJobsRequest(tenant=request.spec.tenant), timeout=10).jobs
    assert len(listed) == 1


def test_preview_uses_the_firing_rules(service: RunningService) -> None:
    stub = _stub(service)
    request = pb.PreviewScheduleRequest(cron="30 2 * * *", time_zone="America/New_York",
                                        count=2)
    request.after.FromJsonString("2026-03-07T12:00:00Z")
    times = stub.PreviewSchedule(request, timeout=10).fire_times
    # 02:30 does not exist on 2026-03-08 in New York: it fires at 03:00 EDT (07:00Z).
    assert [t.ToJsonString() for t in times] == ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]


BAD_SPECS = [
    ("spec.time_zone", dict(time_zone="Mars/Olympus_Mons")),
    ("spec.schedule.cron", dict(cron="61 * * * *")),
    ("spec.handler", dict(handler="")),
    ("spec.timeout", dict(timeout_seconds=-5)),
    ("spec.payload", dict(payload=b"x" * (256 * 1024 + 1))),
]


def _inbox_ends(consumer: Consumer, settings: Settings) -> dict[int, int]:
    return {p: consumer.get_watermark_offsets(TopicPartition(settings.inbox_topic, p),
                                              timeout=10)[1]
            for p in range(settings.partitions)}


def _inbox_values_since(consumer: Consumer, settings: Settings,
                        before: dict[int, int]) -> list[bytes]:
    after = _inbox_ends(consumer, settings)
    grown = {p: (before[p], end) for p, end in after.items() if end > before[p]}
    if not grown:
        return []
    consumer.assign([TopicPartition(settings.inbox_topic, p, start)
                     for p, (start, _) in grown.items()])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while grown and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        # A message delivered without an error has its offset; the stubs say Optional.
        if (message is not None and not message.error()
                and (partition := message.partition()) in grown
                and cast(int, message.offset()) < grown[partition][1]):
            values.append(message.value() or b"")
        # Positions, not counts: transaction markers take offsets and are never delivered.
        for tp in consumer.position([TopicPartition(settings.inbox_topic, p) for p in grown]):
            if tp.offset >= grown[tp.partition][1]:
                del grown[tp.partition]
    assert not grown, f"inbox partitions {sorted(grown)} could not be read to their ends"
    return values


@pytest.mark.parametrize(("field", "change"), BAD_SPECS, ids=[f for f, _ in BAD_SPECS])
def test_bad_input_is_invalid_argument_naming_the_field_and_writes_nothing(
        service: RunningService, field: str, change: dict[str, object]) -> None:
    stub = _stub(service)
    tenant = "bad-" + uuid.uuid4().hex[:6]
    spec = pb.JobSpec(name="bad", tenant=tenant, handler="echo", cron="* * * * *",
                      time_zone="UTC")
    timeout = change.pop("timeout_seconds", None)
    for key, value in change.items():
        setattr(spec, key, value)
    if timeout is not None:
        spec.timeout.seconds = int(timeout)  # type: ignore[call-overload]
    settings = service.settings
    assert isinstance(settings, Settings)
    request_id = str(uuid.uuid4())
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "probe",
                         "enable.auto.commit": False})
    try:
        before = _inbox_ends(consumer, settings)
        with pytest.raises(grpc.RpcError) as caught:
            stub.CreateJob(pb.CreateJobRequest(request_id=request_id, spec=spec), timeout=30)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # grpc gives every failed call its details; the stubs say Optional.
        assert field in cast(str, caught.value.details())
        # The service is shared: other tests' workers report through the inbox meanwhile,
        # so what is asserted is that no record written since carries this request.
        written = _inbox_values_since(consumer, settings, before)
    finally:
        consumer.close()
    assert not [v for v in written if request_id.encode() in v or tenant.encode() in v], \
        "a rejected request must not reach the inbox"
    assert not stub.ListJobs(pb.ListJobsRequest(tenant=tenant), timeout=10).jobs


def test_reflection_and_health_let_tools_work_without_proto_files(
        service: RunningService) -> None:
    from google.protobuf.descriptor_pool import DescriptorPool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    database = ProtoReflectionDescriptorDatabase(service.channel)
    assert "cronlog.v1.JobService" in database.get_services()
    pool = DescriptorPool(database)
    method = pool.FindServiceByName("cronlog.v1.JobService").FindMethodByName("CreateJob")
    assert method.input_type.full_name == "cronlog.v1.CreateJobRequest"


def test_failing_attempts_are_retried_and_one_off_jobs_complete(
        service: RunningService) -> None:
    from datetime import UTC, datetime, timedelta

    stub = _stub(service)
    spec = pb.JobSpec(name="flaky", tenant="t-" + uuid.uuid4().hex[:6], handler="fail",
                      payload=b'{"times": 1}')
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    spec.retry_policy.max_attempts = 3
    spec.retry_policy.initial_backoff.FromMilliseconds(200)
    job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                         timeout=30).job

    def succeeded() -> pb.Run | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id), timeout=10).runs
        return runs[0] if runs and runs[0].status == pb.RUN_STATUS_SUCCEEDED else None

    run = wait_for(succeeded, 60, "the one-off run succeeding on its second attempt")
    assert [a.status for a in run.attempts] == [pb.ATTEMPT_STATUS_FAILED,
                                                pb.ATTEMPT_STATUS_SUCCEEDED]
    assert "DeliberateFailure" in run.attempts[0].error
    assert run.attempts[1].not_before.ToDatetime() > run.attempts[0].finished_at.ToDatetime()
    after = wait_for(lambda: (lambda j: j if j.status == pb.JOB_STATUS_COMPLETED else None)(
        stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job), 30,
        "the one-off job completed")
    assert not after.HasField("next_fire_at")


def test_audit_reads_a_jobs_timeline_from_the_log(service: RunningService) -> None:
    import os
    import subprocess
    import sys

    from cronlog_dev.processes import settings_env

    stub = _stub(service)
    spec = pb.JobSpec(name="audited", tenant="t-" + uuid.uuid4().hex[:6], handler="echo",
                      cron="* * * * * *")
    job = stub.CreateJob(pb.CreateJobRequest(request_id="audit-req-" + uuid.uuid4().hex,
                                             spec=spec), timeout=30).job
    wait_for(lambda: stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id,
                                                      status=pb.RUN_STATUS_SUCCEEDED),
                                   timeout=10).runs, 30, "a succeeded run")
    settings = service.settings
    assert isinstance(settings, Settings)
    env = {**os.environ, **settings_env(settings)}

    def audit(*extra: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", "audit",
                               "job", job.job_id, *extra], env=env, capture_output=True,
                              text=True, timeout=60, check=True)
        return done.stdout

    out = audit("--as-of", "2000-01-01T00:00:00+00:00")
    for event in ("JobCreated", "JobFireAdvanced", "RunScheduled", "AttemptSucceeded"):
        assert event in out
    # A start reported with its end is in the AttemptSucceeded (its started_at), else its own.
    assert "AttemptStarted" in out or "started_at=" in out
    assert "request audit-req-" in out and "did not exist yet" in out
    assert "status active" in audit("--as-of", "2100-01-01T00:00:00+00:00")
