"""A handler's heartbeats over the real stack.

The worker here heartbeats every second for its running attempts, and the jobs' heartbeat
timeout is 3 s, so an attempt whose handler says nothing outlives its heartbeat timeout on
the worker's heartbeats. Once a handler heartbeats its attempt's liveness is its own: a
handler that keeps heartbeating runs on past the timeout, one that stops is found lost.
GetRun shows a heartbeating attempt's progress while it runs, and its last one after."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.e2e.heartbeat_handlers import BEAT_SECONDS
from tests.e2e.service_groups import WORK
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# The heartbeat handlers, the worker heartbeating every second.
SERVICE = WORK
# 3 s beyond the worker's and the handlers' heartbeats (1 s apart): a heartbeat's way to the
# owner took over 1 s on the starved machine of `make test` (test_user_handlers.py).
HEARTBEAT_TIMEOUT = 4
# Each attempt runs this long: well past the heartbeat timeout.
RUN_SECONDS = 10


def create(stub: pb_grpc.JobServiceStub, handler: str, seconds: int = RUN_SECONDS) -> pb.Job:
    spec = pb.JobSpec(name=handler, tenant="t-" + uuid.uuid4().hex[:6], handler=handler,
                      payload=json.dumps({"seconds": seconds}).encode(),
                      timeout=Duration(seconds=60),
                      heartbeat_timeout=Duration(seconds=HEARTBEAT_TIMEOUT),
                      retry_policy=pb.RetryPolicy(max_attempts=1))
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def ended_run(stub: pb_grpc.JobServiceStub, job_id: str) -> pb.Run:
    ended = (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTERED)

    def probe() -> pb.Run | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job_id), timeout=10).runs
        return runs[0] if runs and runs[0].status in ended and runs[0].attempts else None
    run = wait_for(probe, 60, f"the run of {job_id} ended")
    return stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10).run


def test_a_handler_that_heartbeats_runs_past_its_heartbeat_timeout(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    run = ended_run(stub, create(stub, "beating").job_id)
    (attempt,) = run.attempts
    assert (run.status, attempt.status, attempt.output) == (
        pb.RUN_STATUS_SUCCEEDED, pb.ATTEMPT_STATUS_SUCCEEDED, b"done")
    ran = attempt.finished_at.ToDatetime() - attempt.started_at.ToDatetime()
    assert ran > timedelta(seconds=RUN_SECONDS - 1) > timedelta(seconds=HEARTBEAT_TIMEOUT)
    # Its last heartbeat's details are its last progress, though the one before was
    # recorded less than 10 s earlier: what is held back goes before the attempt's end.
    steps = int(RUN_SECONDS / BEAT_SECONDS)
    assert json.loads(attempt.progress) == {"step": steps, "of": steps}
    assert attempt.started_at.ToDatetime() < attempt.progress_at.ToDatetime() \
        <= attempt.finished_at.ToDatetime()


def test_a_running_attempt_shows_its_progress(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    # Long enough that a busy machine's history still shows it before the attempt ends.
    long_run = 30
    job = create(stub, "beating", long_run)

    def progress() -> dict[str, int] | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id), timeout=10).runs
        if not runs:
            return None
        run = stub.GetRun(pb.GetRunRequest(run_id=runs[0].run_id), timeout=10).run
        running = [a for a in run.attempts if a.status == pb.ATTEMPT_STATUS_RUNNING]
        return json.loads(running[0].progress) if running and running[0].progress else None
    shown = wait_for(progress, long_run, "progress while the attempt runs")
    assert 1 <= shown["step"] < shown["of"]


def test_a_handler_that_stops_heartbeating_is_lost_though_its_worker_lives(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    run = ended_run(stub, create(stub, "hanging").job_id)
    (attempt,) = run.attempts
    assert (run.status, attempt.status) == (pb.RUN_STATUS_DEAD_LETTERED,
                                            pb.ATTEMPT_STATUS_LOST)
    assert f"no heartbeat for {timedelta(seconds=HEARTBEAT_TIMEOUT)}" in attempt.error


def test_a_handler_that_never_heartbeats_is_kept_alive_by_its_worker(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    # The built-in sleep handler ({"seconds": N}) has no heartbeats of its own.
    run = ended_run(stub, create(stub, "sleep").job_id)
    assert [a.status for a in run.attempts] == [pb.ATTEMPT_STATUS_SUCCEEDED]
