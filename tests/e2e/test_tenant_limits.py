"""Per-tenant limits against the real service: a clear error at the job limit, a recorded
delay at the in-flight limit, and no effect on other tenants."""

from __future__ import annotations

import time
import uuid
from itertools import pairwise
from typing import Any

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.e2e.service_groups import SMALL_TENANT, WORK
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
# SMALL may have two jobs and one run in flight.
SMALL = SMALL_TENANT
SERVICE = WORK


def create(stub: pb_grpc.JobServiceStub, tenant: str, name: str) -> pb.Job:
    spec = pb.JobSpec(name=name, tenant=tenant, handler="sleep", payload=b'{"seconds": 1.5}',
                      cron="* * * * * *")
    return stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                          timeout=30).job


def runs_of(stub: pb_grpc.JobServiceStub, tenant: str) -> list[pb.Run]:
    return list(stub.ListRuns(pb.ListRunsRequest(tenant=tenant, page_size=500), timeout=10).runs)


def spans(runs: list[pb.Run]) -> list[tuple[int, int]]:
    return sorted((a.started_at.ToMicroseconds(), a.finished_at.ToMicroseconds())
                  for r in runs for a in r.attempts if a.HasField("finished_at"))


def test_job_limit_refuses_and_in_flight_limit_delays(service: RunningService) -> None:
    from confluent_kafka import Consumer, TopicPartition

    from cronlog.infra.avro.codec import AvroCodec
    from cronlog.infra.config import Settings

    stub = pb_grpc.JobServiceStub(service.channel)
    jobs = [create(stub, SMALL, f"small-{n}") for n in range(2)]
    with pytest.raises(grpc.RpcError) as full:
        create(stub, SMALL, "one-too-many")
    assert full.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "its limit is 2" in (full.value.details() or "")
    listed = stub.ListJobs(pb.ListJobsRequest(tenant=SMALL), timeout=10).jobs
    assert sorted(j.job_id for j in listed) == sorted(j.job_id for j in jobs), "nothing written"
    other = "other-" + uuid.uuid4().hex[:6]
    create(stub, other, "unlimited")

    def ended(tenant: str, count: int) -> list[pb.Run] | None:
        runs = [r for r in runs_of(stub, tenant) if r.status == pb.RUN_STATUS_SUCCEEDED]
        return runs if len(runs) >= count else None

    small_runs = wait_for(lambda: ended(SMALL, 4), 60, "four of the small tenant's runs", 1)
    small = spans(small_runs)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(small)), \
        "one run in flight at a time across the tenant's jobs"
    lags = [a.start_lag.ToMilliseconds() for r in small_runs for a in r.attempts]
    assert max(lags) > 1000, "the runs that waited show it as start lag"
    other_runs = wait_for(lambda: ended(other, 4), 30, "the other tenant's runs", 1)
    assert any(b_start < a_end for (_, a_end), (b_start, _) in pairwise(spans(other_runs))), \
        "another tenant's runs overlap freely"
    for job in jobs:
        stub.PauseJob(pb.PauseJobRequest(request_id=str(uuid.uuid4()), job_id=job.job_id),
                      timeout=30)

    settings = service.settings
    assert isinstance(settings, Settings)
    consumer = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "probe",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(settings.alerts_topic, p, 0)
                     for p in range(settings.partitions)])
    codec = AvroCodec()
    alerts: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not alerts:
        message = consumer.poll(0.5)
        if message is None or message.error():
            continue
        _, record = codec.decode(message.value())  # type: ignore[arg-type]
        if record.get("tenant") == SMALL:
            alerts.append(record)
    consumer.close()
    assert alerts and alerts[0]["kind"] == "tenant_in_flight_limit"

    stub.DeleteJob(pb.DeleteJobRequest(request_id=str(uuid.uuid4()), job_id=jobs[0].job_id),
                   timeout=30)
    assert create(stub, SMALL, "room-again").job_id, "a deleted job frees its place"

