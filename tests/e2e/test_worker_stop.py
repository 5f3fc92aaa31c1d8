"""A worker that stops cleanly leaves `ListWorkers` at once, by its tombstone, not after
the 30 s a silent worker takes to expire (docs/workers.md)."""

from __future__ import annotations

import signal
import time

import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
OWN_SERVICE = "it stops the service's worker"
SERVICE_ROLES = ("api", "worker")
# Well inside the live window (30 s): only the tombstone can empty the list this soon.
WITHDRAWN_WITHIN = 10.0


def test_a_stopped_worker_leaves_the_list_at_once(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)

    def listed() -> list[pb.Worker]:
        return list(stub.ListWorkers(pb.ListWorkersRequest(), timeout=10).workers)

    [worker] = wait_for(listed, 60, "the worker announced")
    # Without CRONLOG_COMMAND_ALLOW the worker runs no command: it does not offer one.
    assert "echo" in worker.handlers and "command" not in worker.handlers
    process = service.processes["worker"]
    process.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    process.wait(30)
    wait_for(lambda: not listed(), WITHDRAWN_WITHIN, "the stopped worker gone from the list")
    assert time.monotonic() - stopped < WITHDRAWN_WITHIN
