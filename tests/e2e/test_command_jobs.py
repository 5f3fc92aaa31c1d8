"""`command` jobs over the real stack: a worker whose operator allows /bin/echo and /bin/sh
runs them and records their output; any other program is refused, never retried; a timeout
and a cancel each leave no process of the attempt's group behind."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog.worker.command_process import group_alive
from tests.e2e.conftest import RunningService, rid
from tests.e2e.service_groups import WORK
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# /bin/echo and /bin/sh allowed, SIGKILL a second after SIGTERM.
SERVICE = WORK
# A shell whose group ignores SIGTERM: only SIGKILL after the grace ends it.
STUBBORN = 'echo $$ > {pid_file}; trap "" TERM; sleep 600 & sleep 600'


def create(stub: pb_grpc.JobServiceStub, argv: list[str], **fields: Any) -> pb.Job:
    spec = pb.JobSpec(name="command", tenant="t-" + uuid.uuid4().hex[:6], handler="command",
                      payload=json.dumps({"argv": argv}).encode(), **fields)
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def ended_run(stub: pb_grpc.JobServiceStub, job_id: str, status: pb.RunStatus.ValueType) -> pb.Run:
    def probe() -> pb.Run | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job_id), timeout=10).runs
        return runs[0] if runs and runs[0].status == status and runs[0].attempts else None
    return wait_for(probe, 60, f"the run of {job_id} in status {pb.RunStatus.Name(status)}")


def group_gone(pgid: int) -> bool:
    """Nothing of the group runs (a killed member may stay a zombie until the container's
    first process reaps it)."""
    return not group_alive(pgid)


def started_group(pid_file: Path) -> int:
    # The probe answers False or the pid; wait_for hands back only a truthy answer.
    return int(cast(str, wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 60,
                                  "the command started")))


def test_an_allowed_command_runs_and_its_output_is_recorded(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = create(stub, ["/bin/echo", "hi"])
    run = ended_run(stub, job.job_id, pb.RUN_STATUS_SUCCEEDED)
    output = json.loads(run.attempts[0].output)
    assert (output["exit_status"], output["stdout"], output["stderr"]) == (0, "hi\n", "")


def test_a_nonzero_exit_status_is_recorded_as_the_error(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = create(stub, ["/bin/sh", "-c", "echo no >&2; exit 4"],
                 retry_policy=pb.RetryPolicy(max_attempts=3,
                                             non_retryable_errors=["exit status 4"]))
    run = ended_run(stub, job.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    assert [a.error for a in run.attempts] == ["exit status 4: /bin/sh failed"]
    assert json.loads(run.attempts[0].output)["stderr"] == "no\n"


def test_a_program_not_allowed_is_refused_and_not_retried(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = create(stub, ["/usr/bin/id"], retry_policy=pb.RetryPolicy(max_attempts=3))
    run = ended_run(stub, job.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    assert [a.error for a in run.attempts] == [
        "CommandNotAllowed: /usr/bin/id is not allowed on this worker; operators allow "
        "executables with CRONLOG_COMMAND_ALLOW"]


def test_a_timed_out_command_leaves_no_process_behind(service: RunningService,
                                                      tmp_path: Path) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    pid_file = tmp_path / "pid"
    job = create(stub, ["/bin/sh", "-c", STUBBORN.format(pid_file=pid_file)],
                 timeout=Duration(seconds=2),
                 retry_policy=pb.RetryPolicy(max_attempts=1))
    pgid = started_group(pid_file)
    wait_for(lambda: group_gone(pgid), 30, "the timed-out attempt's group gone")
    run = ended_run(stub, job.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    assert run.attempts[0].status == pb.ATTEMPT_STATUS_TIMED_OUT


def test_a_cancelled_command_leaves_no_process_behind(service: RunningService,
                                                      tmp_path: Path) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    pid_file = tmp_path / "pid"
    job = create(stub, ["/bin/sh", "-c", STUBBORN.format(pid_file=pid_file)])
    pgid = started_group(pid_file)
    # The worker can start the command before the history has the run.
    run = wait_for(lambda: next(iter(stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id),
                                                   timeout=10).runs), None),
                   60, "the running command's run in the history")
    stub.CancelRun(pb.CancelRunRequest(request_id=rid(), run_id=run.run_id), timeout=30)
    wait_for(lambda: group_gone(pgid), 30, "the cancelled attempt's group gone")
    assert ended_run(stub, job.job_id, pb.RUN_STATUS_CANCELLED).attempts[0].status == \
        pb.ATTEMPT_STATUS_CANCELLED
