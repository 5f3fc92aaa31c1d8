"""Issue 13 item 5's job option over gRPC: a job on a declared queue that no worker serves,
with its own 3 s start timeout, has each attempt lost after 3 s and ends dead-lettered, long
before the scheduler's default start timeout (5 min here) would lose it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.e2e.service_groups import WORK
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

# "unserved" is declared (jobs may name it) but no worker consumes it; the scheduler keeps
# its default start timeout (5 minutes), so only the job's own can lose the attempts this
# soon.
SERVICE = WORK


def _duration(seconds: float) -> Duration:
    out = Duration()
    out.FromTimedelta(timedelta(seconds=seconds))
    return out


def _spec(**fields: object) -> pb.JobSpec:
    at = Timestamp()
    at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    return pb.JobSpec(**{"name": "starts-soon", "tenant": "start-timeout", "handler": "echo",
                         "queue": "unserved", "at": at, **fields})  # type: ignore[arg-type]


def _create(stub: pb_grpc.JobServiceStub, spec: pb.JobSpec) -> pb.Job:
    return stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                          timeout=30).job


def test_a_job_with_a_short_start_timeout_on_an_unserved_queue_is_dead_lettered(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = _create(stub, _spec(start_timeout=_duration(3), retry_policy=pb.RetryPolicy(
        max_attempts=2, initial_backoff=_duration(1), max_backoff=_duration(1))))
    assert job.spec.start_timeout.ToTimedelta() == timedelta(seconds=3)
    fetched = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
    assert fetched.spec.start_timeout.ToTimedelta() == timedelta(seconds=3)

    def dead_lettered() -> pb.Run | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id), timeout=10).runs
        return next((r for r in runs if r.status == pb.RUN_STATUS_DEAD_LETTERED
                     and len(r.attempts) == 2), None)

    run = wait_for(dead_lettered, 60, "the run dead-lettered after two unstarted attempts")
    full = stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10).run
    assert [a.status for a in full.attempts] == [pb.ATTEMPT_STATUS_LOST] * 2
    assert "not started within 0:00:03" in full.reason, full.reason


def test_a_job_without_one_keeps_the_schedulers_default(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = _create(stub, _spec(name="default-start-timeout", queue="default"))
    assert not job.spec.HasField("start_timeout")


@pytest.mark.parametrize("seconds", [0.5, 7 * 24 * 3600 + 1])
def test_a_start_timeout_out_of_bounds_is_refused_naming_the_field(
        service: RunningService, seconds: float) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    with pytest.raises(grpc.RpcError) as error:
        _create(stub, _spec(start_timeout=_duration(seconds)))
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.value.details() or "").startswith("spec.start_timeout"), \
        error.value.details()
