"""Your own handlers over the real stack (issue 36 item 1): the example package
(examples/handlers) installed by pip into a temporary virtualenv, its `cronlog.handlers`
entry point found by a worker started from that virtualenv; its sync and async handlers
run, its NonRetryable ends a run after one attempt; a handler module that cannot be loaded
stops a worker at start, saying which."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.conftest import ROOT
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# The worker is started by this module, from the virtualenv with the example installed.
SERVICE_ROLES = ("api", "scheduler", "projector")
EXAMPLE = ROOT / "examples" / "handlers"


def handler_venv(where: Path) -> Path:
    """A virtualenv that sees this one's packages (cronlog among them) through a .pth file,
    with the example package installed into it by pip, as a user would install theirs."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(purelib, "cronlog_test_parent.pth").write_text(
        f"import site; site.addsitedir({ours!r})\n")
    # From a copy: a build writes its egg-info beside the sources.
    source = shutil.copytree(EXAMPLE, where / "example")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index", str(source)],
                   check=True)
    return python


@pytest.fixture(scope="module")
def venv_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return handler_venv(tmp_path_factory.mktemp("handlers"))


@pytest.fixture(scope="module")
def worker(service: RunningService, venv_python: Path) -> Iterator[subprocess.Popen[bytes]]:
    from cronlog.infra.config import Settings
    from cronlog_dev.processes import spawn_role, stop_all

    assert isinstance(service.settings, Settings)
    process = spawn_role("worker", service.settings, service.log_dir,
                         {"CRONLOG_INSTANCE_ID": "user-handlers-worker"}, python=venv_python)
    yield process
    stop_all([process])


def one_off(stub: pb_grpc.JobServiceStub, handler: str, payload: dict[str, object]) -> pb.Job:
    spec = pb.JobSpec(name=handler, tenant="t-" + uuid.uuid4().hex[:6], handler=handler,
                      payload=json.dumps(payload).encode())
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    spec.retry_policy.max_attempts = 3
    spec.retry_policy.initial_backoff.FromMilliseconds(100)
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def ended(stub: pb_grpc.JobServiceStub, job_id: str) -> pb.Run:
    finished = (pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTERED, pb.RUN_STATUS_FAILED)

    def probe() -> pb.Run | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job_id), timeout=10).runs
        return runs[0] if runs and runs[0].status in finished and runs[0].attempts else None
    return wait_for(probe, 60, f"the run of job {job_id} ending")


def test_a_sync_handler_of_an_installed_package_runs(
        service: RunningService, worker: subprocess.Popen[bytes]) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    job = one_off(stub, "example.report", {"text": "back up the nightly files"})
    run = ended(stub, job.job_id)
    assert run.status == pb.RUN_STATUS_SUCCEEDED, run
    assert json.loads(run.attempts[0].output) == {"words": 5, "attempt": 1,
                                                  "run_id": run.run_id}


def test_an_async_handler_runs(service: RunningService,
                               worker: subprocess.Popen[bytes]) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    run = ended(stub, one_off(stub, "example.pause", {"seconds": 0.2}).job_id)
    assert run.status == pb.RUN_STATUS_SUCCEEDED and run.attempts[0].output == b"paused 0.2 s"


def test_non_retryable_ends_the_run_after_one_attempt(
        service: RunningService, worker: subprocess.Popen[bytes]) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    run = ended(stub, one_off(stub, "example.lookup", {"key": "no such"}).job_id)
    assert run.status == pb.RUN_STATUS_DEAD_LETTERED and len(run.attempts) == 1
    assert run.attempts[0].error == "NonRetryable: no such key 'no such'"
    assert worker.poll() is None, "the worker goes on"


def test_a_heartbeating_handler_outlives_its_heartbeat_timeout_and_shows_its_progress(
        service: RunningService, worker: subprocess.Popen[bytes]) -> None:
    """Eleven files of a second each, a heartbeat after each: the attempt runs twice its
    heartbeat timeout on its handler's heartbeats (the worker's own come every 10 s). The
    timeout leaves 4 s for a heartbeat's way to the owner: 1 s (of a 2 s timeout) was once
    not enough for the test's starved worker."""
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="progress", tenant="t-" + uuid.uuid4().hex[:6],
                      handler="example.progress",
                      payload=json.dumps({"files": 11, "seconds_each": 1.0}).encode(),
                      heartbeat_timeout=Duration(seconds=5),
                      retry_policy=pb.RetryPolicy(max_attempts=1))
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=1))
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    run = ended(stub, job.job_id)
    assert run.status == pb.RUN_STATUS_SUCCEEDED and len(run.attempts) == 1, run
    attempt = run.attempts[0]
    assert attempt.finished_at.ToDatetime() - attempt.started_at.ToDatetime() \
        > timedelta(seconds=2 * 5), "ran past twice its heartbeat timeout"
    assert json.loads(attempt.output) == {"copied": 11}
    assert json.loads(attempt.progress) == {"copied": 11, "of": 11}
    assert attempt.progress_at.ToDatetime() > attempt.started_at.ToDatetime()


def test_a_handler_module_that_cannot_load_stops_the_worker_at_start(
        service: RunningService, venv_python: Path, tmp_path: Path) -> None:
    from cronlog.infra.config import Settings
    from cronlog_dev.processes import spawn_role

    assert isinstance(service.settings, Settings)
    broken = spawn_role("worker", service.settings.with_overrides(
        worker_handlers=("cronlog_example_handlers.missing",)), tmp_path,
        {"CRONLOG_INSTANCE_ID": "broken-worker"}, python=venv_python)
    assert broken.wait(60) == 4
    log = (tmp_path / "worker.log").read_text()
    assert "worker not started" in log and "'cronlog_example_handlers.missing'" in log
    assert "ModuleNotFoundError" in log
