"""Queues are declared by the operator: a job naming any other queue is INVALID_ARGUMENT and
creates no topic; a tenant with allow-lists may use only its queues and handlers."""

from __future__ import annotations

import uuid

import grpc
import pytest
from confluent_kafka.admin import AdminClient

from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.e2e.service_groups import LOCKED_TENANT, WORK
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

# Queue "batch" declared and served; LOCKED may use it alone, and the handler echo alone.
LOCKED = LOCKED_TENANT
SERVICE = WORK


def _create(service: RunningService, **fields: object) -> pb.Job:
    spec = pb.JobSpec(**{"name": "q", "handler": "echo", "cron": "* * * * * *",
                         "time_zone": "UTC", **fields})  # type: ignore[arg-type]
    return pb_grpc.JobServiceStub(service.channel).CreateJob(
        pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec), timeout=30).job


def _topics(service: RunningService) -> set[str]:
    settings = service.settings
    assert isinstance(settings, Settings)
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    return {t for t in admin.list_topics(timeout=30).topics if t.startswith(settings.topic_prefix)}


@pytest.mark.parametrize(("fields", "field_name"), [
    ({"tenant": "open-tenant", "queue": "made-up"}, "spec.queue"),
    ({"tenant": LOCKED, "queue": "default"}, "spec.queue"),
    ({"tenant": LOCKED, "queue": "batch", "handler": "http"}, "spec.handler"),
])
def test_an_undeclared_or_closed_queue_or_handler_is_refused_and_creates_nothing(
        service: RunningService, fields: dict[str, str], field_name: str) -> None:
    before = _topics(service)
    with pytest.raises(grpc.RpcError) as error:
        _create(service, **fields)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.value.details() or "").startswith(field_name), error.value.details()
    assert "batch" not in (error.value.details() or "")
    assert _topics(service) == before
    jobs = pb_grpc.JobServiceStub(service.channel).ListJobs(
        pb.ListJobsRequest(tenant=fields["tenant"]), timeout=10).jobs
    assert list(jobs) == []


def test_a_declared_queue_runs_its_jobs(service: RunningService) -> None:
    settings = service.settings
    assert isinstance(settings, Settings)
    assert settings.dispatch_topic("batch") in _topics(service)
    job = _create(service, tenant=LOCKED, queue="batch", payload=b"on batch")
    stub = pb_grpc.JobServiceStub(service.channel)

    def succeeded() -> list[pb.Run]:
        return list(stub.ListRuns(pb.ListRunsRequest(job_id=job.job_id,
                                                     status=pb.RUN_STATUS_SUCCEEDED),
                                  timeout=10).runs)

    runs = wait_for(succeeded, 60, "a run on the declared queue 'batch' succeeding")
    assert runs[0].queue == "batch"
    assert runs[0].attempts[0].output == b"on batch"
