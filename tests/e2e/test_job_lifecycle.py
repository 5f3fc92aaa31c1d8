"""Pause, resume, update, trigger and delete over gRPC against the real stack."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.e2e.service_groups import QUICK_MISFIRES
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# A short catch-up window, so that a pause of a few seconds already makes misfires.
SERVICE = QUICK_MISFIRES


def runs_of(stub: pb_grpc.JobServiceStub, job_id: str) -> list[pb.Run]:
    return list(stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=200), timeout=10).runs)


def test_pause_resume_update_trigger_delete(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="life", tenant="t-" + uuid.uuid4().hex[:6], handler="echo",
                      payload=b"v1", cron="* * * * * *")
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    wait_for(lambda: len(runs_of(stub, job.job_id)) >= 2, 30, "the job firing")

    pause = pb.PauseJobRequest(request_id=rid(), job_id=job.job_id)
    paused = stub.PauseJob(pause, timeout=30).job
    assert paused.status == pb.JOB_STATUS_PAUSED
    assert stub.PauseJob(pause, timeout=30).job.version == paused.version, "a retry, not a change"
    time.sleep(4)  # runs already pre-enqueued within the lookahead may still finish
    settled = {r.run_id for r in runs_of(stub, job.job_id)}
    time.sleep(3)
    assert {r.run_id for r in runs_of(stub, job.job_id)} == settled, "no run while paused"

    resumed = stub.ResumeJob(pb.ResumeJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).job
    assert resumed.status == pb.JOB_STATUS_ACTIVE
    wait_for(lambda: len(runs_of(stub, job.job_id)) > len(settled), 30, "firing again")

    with pytest.raises(grpc.RpcError) as stale:
        stub.UpdateJob(pb.UpdateJobRequest(request_id=rid(), job_id=job.job_id,
                                           expected_version=1, spec=spec), timeout=30)
    assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    spec.payload = b"v2"

    # Firing does not move the version users see (issue 35): the version read before the
    # every-second job fired again is still the one an update must name.
    current = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
    fired = len(runs_of(stub, job.job_id))
    wait_for(lambda: len(runs_of(stub, job.job_id)) >= fired + 2, 30, "two more fires")
    moved = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
    assert moved.version == current.version and moved.event_version > current.event_version
    for statuses in ([], [pb.JOB_STATUS_ACTIVE]):  # a plain page, and a filtered one
        listed = stub.ListJobs(pb.ListJobsRequest(tenant=spec.tenant, statuses=statuses),
                               timeout=10).jobs
        assert [j.version for j in listed] == [current.version]
    updated = stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job.job_id, expected_version=current.version, spec=spec),
        timeout=30).job
    assert updated.spec.payload == b"v2" and updated.version > current.version
    assert updated.version <= updated.event_version

    stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)
    manual = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).run
    assert manual.trigger == "manual" and manual.run_id

    def manual_succeeded() -> pb.Run | None:
        try:
            run = stub.GetRun(pb.GetRunRequest(run_id=manual.run_id), timeout=10).run
        except grpc.RpcError:
            return None
        return run if run.status == pb.RUN_STATUS_SUCCEEDED else None

    done = wait_for(manual_succeeded, 30, "the manual run succeeding")
    assert done.attempts[0].output == b"v2"

    deleted = stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).job
    assert deleted.status == pb.JOB_STATUS_DELETED
    with pytest.raises(grpc.RpcError) as gone:
        stub.ResumeJob(pb.ResumeJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as unknown:
        stub.PauseJob(pb.PauseJobRequest(request_id=rid(), job_id=str(uuid.uuid4())),
                      timeout=30)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_spread_delays_each_run_by_the_jobs_fixed_offset(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="spread", tenant="t-" + uuid.uuid4().hex[:6], handler="echo",
                      cron="*/2 * * * * *")
    spec.spread.FromSeconds(3)
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    assert job.spec.spread.seconds == 3
    runs = wait_for(lambda: (lambda r: r if len(r) >= 2 else None)(
        [r for r in runs_of(stub, job.job_id) if r.status == pb.RUN_STATUS_SUCCEEDED]),
        40, "two spread runs")
    offsets = {r.attempts[0].not_before.ToMicroseconds() - r.scheduled_at.ToMicroseconds()
               for r in runs}
    assert len(offsets) == 1 and 0 <= offsets.pop() < 3_000_000
    assert all(r.attempts[0].started_at.ToMicroseconds() >=
               r.attempts[0].not_before.ToMicroseconds() for r in runs)


def test_a_run_out_of_retries_is_dead_lettered_and_its_tenant_alerted(
        service: RunningService) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from cronlog.infra.avro.codec import AvroCodec
    from cronlog.infra.config import Settings

    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="doomed", tenant="t-" + uuid.uuid4().hex[:6], handler="fail",
                      payload=b'{"times": 5}', cron="0 0 1 1 *")
    spec.retry_policy.max_attempts = 2
    spec.retry_policy.initial_backoff.FromMilliseconds(100)
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    manual = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).run

    def dead() -> pb.Run | None:
        try:
            run = stub.GetRun(pb.GetRunRequest(run_id=manual.run_id), timeout=10).run
        except grpc.RpcError:
            return None
        return run if run.status == pb.RUN_STATUS_DEAD_LETTERED else None

    run = wait_for(dead, 40, "the run dead-lettered after two failed attempts")
    assert [a.status for a in run.attempts] == [pb.ATTEMPT_STATUS_FAILED] * 2
    assert "attempt 2 of 2" in run.reason
    settings = service.settings
    assert isinstance(settings, Settings)
    codec = AvroCodec()
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "probe",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    found: dict[str, dict[str, object]] = {}
    for topic in (settings.dead_letters_topic, settings.alerts_topic):
        consumer.assign([TopicPartition(topic, p, 0) for p in range(settings.partitions)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and topic not in found:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            name, record = codec.decode(message.value())  # type: ignore[arg-type]
            if str(record.get("run_id")) == manual.run_id:
                found[topic] = {"name": name, **record}
    consumer.close()
    assert found[settings.dead_letters_topic]["name"] == "DeadLetter"
    assert found[settings.dead_letters_topic]["attempts"] == 2
    alert = found[settings.alerts_topic]
    assert alert["name"] == "Alert" and alert["kind"] == "run_dead_lettered"
    assert alert["tenant"] == spec.tenant


def test_a_retry_after_a_long_backoff_waits_in_the_scheduler_not_at_a_worker(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="waits", tenant="t-" + uuid.uuid4().hex[:6], handler="fail",
                      payload=b'{"times": 1}', cron="0 0 1 1 *",
                      retry_policy=pb.RetryPolicy(max_attempts=2))
    # Beyond the lookahead (8 s by default): the retry waits in the scheduler first.
    spec.retry_policy.initial_backoff.FromSeconds(12)
    spec.retry_policy.max_backoff.FromSeconds(12)
    spec.retry_policy.jitter = 0.0
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    run_id = stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).run.run_id

    def attempts() -> list[pb.Attempt]:
        try:
            return list(stub.GetRun(pb.GetRunRequest(run_id=run_id), timeout=10).run.attempts)
        except grpc.RpcError:
            return []

    waiting = wait_for(lambda: (lambda a: a if len(a) == 2 else None)(attempts()), 30,
                       "the retry recorded")[1]
    assert waiting.status == pb.ATTEMPT_STATUS_WAITING and not waiting.HasField("dispatched_at")
    done = wait_for(lambda: (lambda a: a if a and a[-1].status == pb.ATTEMPT_STATUS_SUCCEEDED
                             else None)(attempts()), 40, "the retry succeeding")
    retry = done[1]
    # Handed to the workers only once within the lookahead (8 s by default) of its time.
    lead = retry.not_before.ToDatetime() - retry.dispatched_at.ToDatetime()
    assert timedelta(0) <= lead <= service.settings.lookahead + timedelta(seconds=1), lead
