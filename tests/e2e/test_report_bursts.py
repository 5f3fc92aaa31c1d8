"""A burst of runs with the largest outputs a worker keeps, through the whole service: every
run's finish report reaches its owner and every run ends SUCCEEDED in history, none left
SCHEDULED or RUNNING (issue 13, item 4). Before report batches were capped in bytes, 200
such reports made one 12.8 MiB WorkerReports message the producer refused, and the worker
lost them."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.e2e.large_output_handler import OUTPUT_BYTES, output_of
from tests.e2e.service_groups import WORK
from tests.support.polling import wait_for
from tests.support.throttled import applied, served

pytestmark = pytest.mark.e2e
# The large output handler.
SERVICE = WORK
RUNS = 1000
# Four tenants, so that no tenant's in-flight limit (1,000 by default) holds runs back.
TENANTS = 4
# A page of runs with 64 KiB outputs stays under gRPC's default 4 MiB message.
PAGE = 40


def create(stub: pb_grpc.JobServiceStub, tenant: str, at: datetime) -> str:
    spec = pb.JobSpec(name="large-output", tenant=tenant, handler="large_output")
    # Jobs created after the burst's instant go at once rather than into the past.
    spec.at.FromDatetime(max(at, datetime.now(UTC) + timedelta(seconds=2)))
    request = pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec)
    return str(applied(lambda: stub.CreateJob(request, timeout=30)).job.job_id)


def runs_in(stub: pb_grpc.JobServiceStub, tenant: str, status: pb.RunStatus.ValueType,
            page_size: int = PAGE, every_page: bool = True) -> list[pb.Run]:
    runs: list[pb.Run] = []
    token = ""
    while True:
        # Runs of 64 KiB outputs: a page owes a read per 16 KiB of it.
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        reply = served(lambda token=token: stub.ListRuns(pb.ListRunsRequest(  # type: ignore[misc]
            tenant=tenant, status=status, page_size=page_size, page_token=token), timeout=30))
        runs.extend(reply.runs)
        token = reply.next_page_token
        if not token or not every_page:
            return runs


def test_a_burst_of_runs_with_64_kib_outputs_all_end_succeeded(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenants = [f"burst-{uuid.uuid4().hex[:6]}-{n}" for n in range(TENANTS)]
    # One instant for every run, so that the worker starts them as one burst and gathers
    # their finish reports while it catches up.
    at = datetime.now(UTC) + timedelta(seconds=40)
    with ThreadPoolExecutor(8) as pool:
        jobs = list(pool.map(lambda n: (tenants[n % TENANTS], create(stub, tenants[n % TENANTS],
                                                                     at)), range(RUNS)))
    assert len({job for _, job in jobs}) == RUNS
    last: dict[str, object] = {}

    def all_succeeded() -> bool:
        for tenant in tenants:
            for status in (pb.RUN_STATUS_SCHEDULED, pb.RUN_STATUS_RUNNING):
                waiting = runs_in(stub, tenant, status, page_size=1, every_page=False)
                if waiting:
                    last.update(tenant=tenant, waiting=pb.RunStatus.Name(status))
                    return False
        succeeded = [r for t in tenants for r in runs_in(stub, t, pb.RUN_STATUS_SUCCEEDED)]
        last.update(succeeded=len(succeeded))
        last["runs"] = succeeded
        return len(succeeded) == RUNS

    try:
        wait_for(all_succeeded, 150, f"{RUNS} runs SUCCEEDED in history", interval=3)
    except AssertionError:
        last.pop("runs", None)
        raise AssertionError(f"not every run succeeded; last seen: {last}") from None
    runs = last["runs"]
    assert isinstance(runs, list)
    assert {r.job_id for r in runs} == {job for _, job in jobs}, "a run missing or doubled"
    for run in runs:
        (attempt,) = run.attempts
        assert attempt.output == output_of(uuid.UUID(run.run_id))
        assert len(attempt.output) == OUTPUT_BYTES and not attempt.output_truncated
    for tenant in tenants:
        for status in (pb.RUN_STATUS_FAILED, pb.RUN_STATUS_DEAD_LETTERED):
            assert runs_in(stub, tenant, status) == [], f"{tenant}: runs {status}"
    # A report the producer refused used to raise out of the worker's loop.
    for role, process in service.processes.items():
        assert process.poll() is None, f"{role} exited; see {service.log_dir / role}.log"

