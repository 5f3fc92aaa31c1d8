"""Workers you can see (docs/workers.md): `cronlog workers list` shows the service's worker
with its handlers, and a job whose handler no live worker offers is created with a warning,
not refused."""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any

import pytest

from cronlog.client import connect
from cronlog.console.ports import Credentials
from cronlog.infra.console.grpc_api import GrpcJobsApi
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.support.cli import cronlog
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def cli(capfd: pytest.CaptureFixture[str], service: RunningService, *args: str) -> tuple[Any, str]:
    code, out, err = cronlog(capfd, "--address", service.address, *args)
    assert code == 0, out + err
    return json.loads(out), err


def test_workers_list_shows_the_worker_with_its_handlers(
        service: RunningService, capfd: pytest.CaptureFixture[str]) -> None:
    def listed() -> list[dict[str, Any]]:
        workers: list[dict[str, Any]] = cli(capfd, service, "workers", "list")[0].get("workers", [])
        return workers

    [worker] = wait_for(listed, 60, "the worker in `cronlog workers list`")
    assert worker["worker_id"] == f"{socket.gethostname()}-{service.processes['worker'].pid}"
    assert worker["host"] == socket.gethostname()
    assert "default" in worker["queues"]
    assert {"echo", "sleep", "fail", "http"} <= set(worker["handlers"])
    assert worker["slots"] > 0 and worker["version"]
    only_default = cli(capfd, service, "workers", "list", "--queue", "default")[0]["workers"]
    assert [w["worker_id"] for w in only_default] == [worker["worker_id"]]
    table = cronlog(capfd, "--address", service.address, "-o", "table", "workers", "list")[1]
    assert worker["worker_id"] in table and "echo" in table
    # The console's page reads the same through its adapter.
    with connect(service.address) as client:
        [seen] = GrpcJobsApi(client).list_workers(Credentials(None, ""))
    assert (seen.worker_id, seen.handlers) == (worker["worker_id"], tuple(worker["handlers"]))


def test_a_job_no_live_worker_can_run_is_created_with_a_warning(
        service: RunningService, capfd: pytest.CaptureFixture[str]) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    wait_for(lambda: stub.ListWorkers(pb.ListWorkersRequest(), timeout=10).workers, 60,
             "the worker announced")
    tenant = "w-" + uuid.uuid4().hex[:6]
    answer, err = cli(capfd, service, "jobs", "create", "--name", "nobody-runs-it", "--tenant",
                      tenant, "--handler", "no-such-handler", "--cron", "0 0 1 1 *")
    [warning] = answer["warnings"]
    assert "no live worker of queue 'default' offers handler 'no-such-handler'" in warning
    assert f"warning: {warning}" in err
    job = answer["job"]
    # Created all the same: a warning is advice.
    assert stub.GetJob(pb.GetJobRequest(job_id=job["job_id"]), timeout=10).job.spec.handler \
        == "no-such-handler"

    fixed = stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job["job_id"], expected_version=int(job["version"]),
        spec=pb.JobSpec(name="nobody-runs-it", tenant=tenant, handler="echo",
                        cron="0 0 1 1 *")), timeout=30)
    assert list(fixed.warnings) == []
    broken = stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job["job_id"], expected_version=fixed.job.version,
        spec=pb.JobSpec(name="nobody-runs-it", tenant=tenant, handler="gone",
                        cron="0 0 1 1 *")), timeout=30)
    assert ["'gone'" in w for w in broken.warnings] == [True]
