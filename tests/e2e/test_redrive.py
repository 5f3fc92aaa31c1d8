"""Re-driving a dead letter over the real stack (issue 37 item 4, docs/lifecycle.md): RedriveRun
gives a dead-lettered run a new series of attempts under its own run id, counted afresh
by its retry policy and numbered on from its last attempt; the end shows in GetRun and in
ClickHouse, a retry of the request re-drives once, the audit says who asked, and a run
that is not a dead letter is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import cast

import grpc
import pytest

from cronlog.infra.composition import build_run_history
from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def cronlog(service: RunningService, *args: str) -> subprocess.CompletedProcess[str]:
    settings = service.settings
    assert isinstance(settings, Settings)
    return subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **settings_env(settings),
                               "CRONLOG_GRPC_ADDRESS": service.address})


def failing_job(stub: pb_grpc.JobServiceStub, times: int, max_attempts: int) -> pb.Job:
    """A one-off job whose attempts fail `times` times (the `fail` handler fails while its
    attempt number is at most `times`)."""
    spec = pb.JobSpec(name="flaky", tenant="rd-" + uuid.uuid4().hex[:6], handler="fail",
                      payload=json.dumps({"times": times}).encode(),
                      retry_policy=pb.RetryPolicy(max_attempts=max_attempts))
    spec.retry_policy.initial_backoff.FromTimedelta(timedelta(milliseconds=100))
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def the_run(stub: pb_grpc.JobServiceStub, job_id: str, status: pb.RunStatus.ValueType) -> pb.Run:
    def found() -> pb.Run | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job_id), timeout=10).runs
        return runs[0] if runs and runs[0].status == status else None
    return wait_for(found, 60, f"the run of {job_id} in status {pb.RunStatus.Name(status)}")


def test_a_redriven_dead_letter_gets_a_new_series_of_attempts_under_its_own_id(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = failing_job(stub, times=3, max_attempts=2)
    dead = the_run(stub, job.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    assert [a.number for a in dead.attempts] == [1, 2]

    # Through the CLI, as a user would; the request id is kept for the retry below.
    request_id = rid()
    done = cronlog(service, "runs", "redrive", dead.run_id, "--request-id", request_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["run"]["status"] != "RUN_STATUS_DEAD_LETTERED"

    # Attempt 3 fails and attempt 4 succeeds: the policy's two attempts counted afresh.
    ended = the_run(stub, job.job_id, pb.RUN_STATUS_SUCCEEDED)
    assert ended.run_id == dead.run_id and ended.idempotency_key == dead.idempotency_key
    assert [(a.number, a.status) for a in ended.attempts] == [
        (1, pb.ATTEMPT_STATUS_FAILED), (2, pb.ATTEMPT_STATUS_FAILED),
        (3, pb.ATTEMPT_STATUS_FAILED), (4, pb.ATTEMPT_STATUS_SUCCEEDED)]
    got = stub.GetRun(pb.GetRunRequest(run_id=dead.run_id), timeout=10).run
    assert got.status == pb.RUN_STATUS_SUCCEEDED and not got.reason

    # The same request again is answered as the first time and re-drives nothing more.
    again = stub.RedriveRun(pb.RedriveRunRequest(request_id=request_id, run_id=dead.run_id),
                            timeout=30).run
    assert again.status == pb.RUN_STATUS_SUCCEEDED

    # ClickHouse, as an analyst reads it: the run's attempts and its RunRedriven event.
    settings = service.settings
    assert isinstance(settings, Settings)
    history = build_run_history(settings)
    db = settings.clickhouse_database
    rows = history.execute(
        f"SELECT attempt, attempt_status, run_status FROM {db}.runs FINAL "
        "WHERE run_id = %(r)s ORDER BY attempt", {"r": dead.run_id})
    assert rows == [(1, "failed", "succeeded"), (2, "failed", "succeeded"),
                    (3, "failed", "succeeded"), (4, "succeeded", "succeeded")]
    events = history.execute(
        f"SELECT event_type, count() FROM {db}.run_events FINAL WHERE run_id = %(r)s "
        "AND event_type = 'RunRedriven' GROUP BY event_type", {"r": dead.run_id})
    assert events == [("RunRedriven", 1)], "one re-drive for two requests with one id"

    # The audit, from the log alone, says who asked and after which attempt.
    audit = cronlog(service, "audit", "job", job.job_id)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    line = next(line for line in audit.stdout.splitlines() if "RunRedriven" in line)
    assert f"request {request_id}" in line and "attempts_before=2" in line, line
    assert "requested_by=caller at " in line, line

    # Only a dead letter can be re-driven.
    with pytest.raises(grpc.RpcError) as refused:
        stub.RedriveRun(pb.RedriveRunRequest(request_id=rid(), run_id=dead.run_id), timeout=30)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # grpc gives every failed call its details; the stubs say Optional.
    assert "not dead-lettered" in cast(str, refused.value.details())
    with pytest.raises(grpc.RpcError) as unknown:
        stub.RedriveRun(pb.RedriveRunRequest(request_id=rid(), run_id=str(uuid.uuid4())),
                        timeout=30)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_dead_letter_of_a_deleted_job_is_not_redriven(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = failing_job(stub, times=5, max_attempts=1)
    dead = the_run(stub, job.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)
    with pytest.raises(grpc.RpcError) as refused:
        stub.RedriveRun(pb.RedriveRunRequest(request_id=rid(), run_id=dead.run_id), timeout=30)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # grpc gives every failed call its details; the stubs say Optional.
    assert "was deleted" in cast(str, refused.value.details())
