"""Issue 13 item 2 over gRPC: out-of-range times, huge durations, schedules that never fire
and oversized requests are INVALID_ARGUMENT naming the field, nothing is written, and the
service goes on firing a normal job afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import cast

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

TENANT = "bounds-" + uuid.uuid4().hex[:6]


def _stub(service: RunningService) -> pb_grpc.JobServiceStub:
    return pb_grpc.JobServiceStub(service.channel)


def _ts(value: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def _spec(**fields: object) -> pb.JobSpec:
    spec = pb.JobSpec(name="bounded", tenant=TENANT, handler="echo", cron="* * * * * *")
    for name, value in fields.items():
        if name in ("cron", "time_zone"):
            setattr(spec, name, value)
        elif name == "retry_policy":
            spec.retry_policy.CopyFrom(value)  # type: ignore[arg-type]
        else:
            getattr(spec, name).CopyFrom(value)
    return spec


def _refused(call: Callable[[], object], field: str) -> str:
    """Calls the RPC; it must fail INVALID_ARGUMENT with the field named in the message and
    in the trailing metadata. Returns the message."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, \
        f"{error.code()}: {error.details()}"
    details = error.details() or ""
    assert details.startswith(field), details
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = dict(cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ()))
    assert trailing.get("cronlog-field") == field
    return details


@pytest.mark.parametrize(("field", "spec"), [
    ("spec.start_at", _spec(start_at=_ts(datetime(9999, 12, 31, tzinfo=UTC)))),
    ("spec.end_at", _spec(end_at=_ts(datetime(2100, 1, 1, tzinfo=UTC)))),
    ("spec.schedule.at", pb.JobSpec(name="old", tenant=TENANT, handler="echo",
                                    at=_ts(datetime(1969, 7, 20, 20, 17, tzinfo=UTC)))),
    ("spec.retry_policy.initial_backoff", _spec(retry_policy=pb.RetryPolicy(
        initial_backoff=Duration(seconds=10**12), max_backoff=Duration(seconds=10**12)))),
    ("spec.retry_policy.max_backoff", _spec(retry_policy=pb.RetryPolicy(
        max_backoff=Duration(seconds=8 * 86400)))),
    ("spec.timeout", _spec(timeout=Duration(seconds=2**62))),
    ("spec.spread", _spec(spread=Duration(seconds=1, nanos=-5))),
    ("spec.schedule.cron", _spec(cron="0 0 31 2 *")),
    ("spec.schedule.cron", _spec(cron="0 0 30 2 *")),
    ("spec.end_at", _spec(cron="0 0 1 1 *", start_at=_ts(datetime(2026, 2, 1, tzinfo=UTC)),
                          end_at=_ts(datetime(2026, 12, 1, tzinfo=UTC)))),
    ("spec.time_zone", _spec(time_zone="America")),
])
def test_create_out_of_bounds_is_invalid_argument_naming_the_field(
        service: RunningService, field: str, spec: pb.JobSpec) -> None:
    stub = _stub(service)
    request = pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec)
    details = _refused(lambda: stub.CreateJob(request, timeout=30), field)
    if field == "spec.schedule.cron":
        assert "never fires" in details


def test_preview_out_of_bounds_is_invalid_argument_not_unknown(
        service: RunningService) -> None:
    stub = _stub(service)
    _refused(lambda: stub.PreviewSchedule(
        pb.PreviewScheduleRequest(cron="* * * * *", count=2**31 - 1), timeout=10), "count")
    _refused(lambda: stub.PreviewSchedule(
        pb.PreviewScheduleRequest(cron="* * * * *", count=-1), timeout=10), "count")
    _refused(lambda: stub.PreviewSchedule(pb.PreviewScheduleRequest(
        cron="* * * * *", after=_ts(datetime(9999, 12, 31, tzinfo=UTC))), timeout=10), "after")
    _refused(lambda: stub.PreviewSchedule(pb.PreviewScheduleRequest(
        cron="* * * * *", start_at=_ts(datetime(9999, 12, 31, tzinfo=UTC))), timeout=10),
        "start_at")
    _refused(lambda: stub.PreviewSchedule(
        pb.PreviewScheduleRequest(cron="0 0 31 2 *"), timeout=10), "cron")
    # The last fire times of the range, and nothing past it.
    tail = stub.PreviewSchedule(pb.PreviewScheduleRequest(
        cron="59 59 23 31 12 *", count=5,
        after=_ts(datetime(2097, 1, 1, tzinfo=UTC))), timeout=10).fire_times
    assert [t.ToDatetime(tzinfo=UTC).year for t in tail] == [2097, 2098, 2099]


def test_list_and_backfill_bounds(service: RunningService) -> None:
    stub = _stub(service)
    _refused(lambda: stub.ListJobs(pb.ListJobsRequest(tenant=TENANT, page_token="x" * 10_000),
                                   timeout=10), "page_token")
    _refused(lambda: stub.ListRuns(pb.ListRunsRequest(tenant=TENANT, page_size=-1),
                                   timeout=10), "page_size")
    spec = pb.JobSpec(name="for-backfill", tenant=TENANT, handler="echo", cron="0 3 * * *")
    job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                         timeout=30).job
    backfill = pb.BackfillJobRequest(request_id=str(uuid.uuid4()), job_id=job.job_id)
    getattr(backfill, "from").CopyFrom(_ts(datetime(1900, 1, 1, tzinfo=UTC)))
    backfill.until.CopyFrom(_ts(datetime(2000, 1, 1, tzinfo=UTC)))
    _refused(lambda: stub.BackfillJob(backfill, timeout=30), "from")
    stub.DeleteJob(pb.DeleteJobRequest(request_id=str(uuid.uuid4()), job_id=job.job_id),
                   timeout=30)


def test_nothing_refused_was_stored_and_a_normal_job_still_fires(
        service: RunningService) -> None:
    stub = _stub(service)
    listed = stub.ListJobs(pb.ListJobsRequest(tenant=TENANT, page_size=1000), timeout=10).jobs
    assert [j.spec.name for j in listed if j.status != pb.JOB_STATUS_DELETED] == []
    spec = pb.JobSpec(name="still-firing", tenant=TENANT, handler="echo", payload=b"ok",
                      cron="* * * * * *", time_zone="Europe/Berlin")
    job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                         timeout=30).job

    def two_succeeded() -> list[pb.Run] | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id,
                                                status=pb.RUN_STATUS_SUCCEEDED), timeout=10).runs
        return list(runs) if len(runs) >= 2 else None

    wait_for(two_succeeded, 60, "two succeeded runs of a normal job after the refusals")
    for role, process in service.processes.items():
        assert process.poll() is None, f"{role} exited"
