"""Request ids over gRPC: per tenant and job. A tenant reusing an id another tenant (or another
job) used gets its own command applied; a retry gets the first outcome; the same id with
another request is refused naming request_id; replies reach each sender by its own
correlation id, even when two tenants send the same id at the same moment."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

ALPHA, BETA = "alpha", "beta"
ALPHA_TOKEN = "alpha-" + uuid.uuid4().hex
BETA_TOKEN = "beta-" + uuid.uuid4().hex
A = (("authorization", f"Bearer {ALPHA_TOKEN}"),)
B = (("authorization", f"Bearer {BETA_TOKEN}"),)
Metadata = tuple[tuple[str, str], ...]


SERVICE_ENV = {"CRONLOG_TENANT_TOKENS": f"{ALPHA}={ALPHA_TOKEN},{BETA}={BETA_TOKEN}"}


def rid() -> str:
    return "req-" + uuid.uuid4().hex


def a_job(stub: pb_grpc.JobServiceStub, tenant: str, metadata: Metadata) -> pb.Job:
    """A job that does not fire on its own during the test."""
    spec = pb.JobSpec(name=f"{tenant}-job", tenant=tenant, handler="echo", cron="0 0 1 1 *")
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30,
                          metadata=metadata).job


def status_of(stub: pb_grpc.JobServiceStub, job_id: str, metadata: Metadata) -> int:
    return int(stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10,
                           metadata=metadata).job.status)


def refusal(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


def field_of(error: grpc.RpcError) -> str | None:
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ())
    return dict(trailing).get("cronlog-field")


def test_another_tenants_request_id_pauses_the_callers_own_job(
        stub: pb_grpc.JobServiceStub) -> None:
    alpha, beta = a_job(stub, ALPHA, A), a_job(stub, BETA, B)
    shared = rid()
    paused = stub.PauseJob(pb.PauseJobRequest(request_id=shared, job_id=alpha.job_id),
                           timeout=30, metadata=A).job
    assert paused.status == pb.JOB_STATUS_PAUSED
    mine = stub.PauseJob(pb.PauseJobRequest(request_id=shared, job_id=beta.job_id),
                         timeout=30, metadata=B).job
    assert mine.job_id == beta.job_id and mine.status == pb.JOB_STATUS_PAUSED
    assert status_of(stub, beta.job_id, B) == pb.JOB_STATUS_PAUSED


def test_a_trigger_with_an_id_used_on_another_job_starts_a_run_that_exists(
        stub: pb_grpc.JobServiceStub) -> None:
    first, second = a_job(stub, ALPHA, A), a_job(stub, ALPHA, A)
    shared = rid()
    stub.TriggerJob(pb.TriggerJobRequest(request_id=shared, job_id=first.job_id), timeout=30,
                    metadata=A)
    run = stub.TriggerJob(pb.TriggerJobRequest(request_id=shared, job_id=second.job_id),
                          timeout=30, metadata=A).run

    def exists() -> pb.Run | None:
        try:
            found = stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10,
                                metadata=A).run
        except grpc.RpcError:
            return None
        return found if found.job_id == second.job_id else None

    wait_for(exists, 30, "the second job's manual run")


def test_a_retried_pause_gets_the_first_outcome(stub: pb_grpc.JobServiceStub) -> None:
    job = a_job(stub, BETA, B)
    request = pb.PauseJobRequest(request_id=rid(), job_id=job.job_id)
    first = stub.PauseJob(request, timeout=30, metadata=B).job
    again = stub.PauseJob(request, timeout=30, metadata=B).job
    assert first.status == again.status == pb.JOB_STATUS_PAUSED
    assert again.version == first.version, "applied once"


def test_the_same_id_with_another_request_is_refused_naming_request_id(
        stub: pb_grpc.JobServiceStub) -> None:
    job = a_job(stub, ALPHA, A)
    used = rid()
    stub.PauseJob(pb.PauseJobRequest(request_id=used, job_id=job.job_id), timeout=30,
                  metadata=A)
    error = refusal(lambda: stub.ResumeJob(
        pb.ResumeJobRequest(request_id=used, job_id=job.job_id), timeout=30, metadata=A))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_of(error) == "request_id"
    assert "request_id" in (error.details() or "")
    assert status_of(stub, job.job_id, A) == pb.JOB_STATUS_PAUSED, "the resume did nothing"


def test_two_tenants_sending_one_id_at_once_each_get_their_own_reply(
        stub: pb_grpc.JobServiceStub) -> None:
    jobs = [(a_job(stub, ALPHA, A), A), (a_job(stub, BETA, B), B)] * 3
    shared = rid()

    def pause(job: pb.Job, metadata: Metadata) -> pb.Job:
        return stub.PauseJob(pb.PauseJobRequest(request_id=shared, job_id=job.job_id),
                             timeout=30, metadata=metadata).job

    with ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(lambda pair: pause(*pair), jobs))
    for (job, metadata), answer in zip(jobs, answers, strict=True):
        assert answer.job_id == job.job_id and answer.status == pb.JOB_STATUS_PAUSED
        assert status_of(stub, job.job_id, metadata) == pb.JOB_STATUS_PAUSED
