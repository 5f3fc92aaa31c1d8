"""Ready means ready: the api's health says SERVING only while every inbox partition has a
scheduler that has caught up, so a command sent once it does is answered on its first try;
a command no owner can decide waits within the caller's deadline and says what it waited
for."""

from __future__ import annotations

import subprocess
import time
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import spawn_role
from tests.e2e.conftest import RunningService, start_service, stop_service
from tests.support.polling import wait_for

# Asserts timing (the refusal comes just before the caller's deadline): make test runs it
# with the measured modules (scripts/test-suites.sh).
pytestmark = [pytest.mark.e2e, pytest.mark.measured]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _health(service: RunningService) -> int:
    reply = health_pb2_grpc.HealthStub(service.channel).Check(
        health_pb2.HealthCheckRequest(service="cronlog.v1.JobService"), timeout=2)
    return int(reply.status)


def _create(service: RunningService, tenant: str, i: int, timeout: float) -> pb.Job:
    spec = pb.JobSpec(name=f"ready-{i}", tenant=tenant, handler="echo",
                      cron="*/10 * * * * *", time_zone="Europe/Berlin")
    return pb_grpc.JobServiceStub(service.channel).CreateJob(
        pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec), timeout=timeout).job


def _spawn_scheduler(service: RunningService, name: str) -> subprocess.Popen[bytes]:
    process = spawn_role("scheduler", service.settings, service.log_dir / name,
                         {"CRONLOG_INSTANCE_ID": f"{name}-{uuid.uuid4().hex[:6]}"})
    service.processes[name] = process
    return process


def test_serving_only_once_every_partition_has_a_caught_up_scheduler(
        stack_settings: object) -> None:
    service = start_service(stack_settings, "readiness", roles=("api", "worker"))
    tenant = "ready-" + uuid.uuid4().hex[:6]
    try:
        wait_for(lambda: _health(service) == NOT_SERVING, 30, "health NOT_SERVING")

        # No scheduler: the command waits as long as the caller allows, then says why.
        began = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            _create(service, tenant, 0, timeout=3)
        waited = time.monotonic() - began
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value.details()
        # UNAVAILABLE, not DEADLINE_EXCEEDED, says the api answered within the deadline; the
        # upper bound only leaves a starved client room to see the answer.
        assert 2.0 < waited < 4.0, f"waited {waited:.2f}s for a 3 s deadline"
        details = refused.value.details() or ""
        assert "inbox partition" in details and "no scheduler holds it" in details, details
        assert "retry with the same request id" in details, details

        first = _spawn_scheduler(service, "first")
        wait_for(lambda: _health(service) == SERVING, 60, "health SERVING")
        # First try, every partition (the ids are hashes: 8 jobs a partition on average).
        for i in range(8 * service.settings.partitions):
            _create(service, tenant, 100 + i, timeout=10)

        # A restart: NOT_SERVING while the new scheduler has not caught up, then SERVING,
        # and again every command is answered on its first try.
        first.terminate()
        assert first.wait(30) == 0
        wait_for(lambda: _health(service) == NOT_SERVING, 10, "health NOT_SERVING again")
        _spawn_scheduler(service, "second")
        wait_for(lambda: _health(service) == SERVING, 60, "health SERVING again")
        for i in range(8 * service.settings.partitions):
            _create(service, tenant, 200 + i, timeout=10)
    finally:
        stop_service(service)
