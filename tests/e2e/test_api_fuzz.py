"""Random requests at the api: every answer is OK or a clear client error, the service stays
up, and whatever it stored is valid."""

from __future__ import annotations

import uuid

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronlog.domain.spec import validate_spec
from cronlog.infra.grpc.convert import spec_in
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.examples import examples

pytestmark = pytest.mark.e2e

CLIENT_ERRORS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                 grpc.StatusCode.FAILED_PRECONDITION}
TENANT = "fuzz-" + uuid.uuid4().hex[:6]

texts = st.one_of(st.sampled_from(["", "echo", "default", "a b", "x" * 300, "ü", "../etc"]),
                  st.text(max_size=20))
crons = st.one_of(st.sampled_from(["* * * * *", "*/2 * * * * *", "@hourly", "61 * * * *",
                                   "", "0 0 30 2 *", "a b c d e", "* * * * * * *"]),
                  st.text(max_size=30))
zones = st.sampled_from(["UTC", "Europe/Berlin", "Australia/Lord_Howe", "", "Mars/Base",
                         "utc", "../../etc/passwd"])
seconds = st.integers(min_value=-10**11, max_value=10**11)


@st.composite
def specs(draw: st.DrawFn) -> pb.JobSpec:
    spec = pb.JobSpec(name=draw(texts), tenant=draw(st.sampled_from([TENANT, "", "bad tenant"])),
                      queue=draw(texts), handler=draw(texts),
                      payload=draw(st.binary(max_size=64)), time_zone=draw(zones))
    if draw(st.booleans()):
        spec.cron = draw(crons)
    elif draw(st.booleans()):
        spec.at.seconds = draw(seconds)
    for field in ("timeout", "heartbeat_timeout", "spread"):
        if draw(st.booleans()):
            getattr(spec, field).seconds = draw(st.integers(-10**6, 10**9))
    for field in ("start_at", "end_at"):
        if draw(st.booleans()):
            getattr(spec, field).seconds = draw(seconds)
    if draw(st.booleans()):
        spec.retry_policy.max_attempts = draw(st.integers(-5, 500))
        spec.retry_policy.coefficient = draw(st.floats(allow_nan=True, allow_infinity=True))
        spec.retry_policy.jitter = draw(st.floats(allow_nan=True, allow_infinity=True))
    spec.misfire_policy = draw(st.integers(0, 5))  # type: ignore[assignment]
    spec.overlap_policy = draw(st.integers(0, 6))  # type: ignore[assignment]
    return spec


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=specs())
def test_random_create_requests(service: RunningService, spec: pb.JobSpec) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    try:
        job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                             timeout=30).job
    except grpc.RpcError as exc:
        assert exc.code() in CLIENT_ERRORS, f"{exc.code()}: {exc.details()}"
        assert exc.details()
        return
    # Whatever was stored reads back and passes validation again.
    stored = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
    validate_spec(spec_in(stored.spec))


def test_the_service_is_still_up_and_stored_only_valid_jobs(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    jobs = stub.ListJobs(pb.ListJobsRequest(tenant=TENANT, page_size=1000), timeout=10).jobs
    for job in jobs:
        validate_spec(spec_in(job.spec))
    for process in service.processes.values():
        assert process.poll() is None, "a process died under random input"
