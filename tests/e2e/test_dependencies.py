"""Job dependencies over gRPC against the real stack (issue 16): a chain A -> B -> C with a
fan-in D after B and C, on success; on failure, an alert job runs and an on-success
dependent does not; a cascading trigger re-runs a chain; an upstream with dependents cannot
be deleted."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import TimedOut, wait_for

pytestmark = pytest.mark.e2e


def create(stub: pb_grpc.JobServiceStub, spec: pb.JobSpec) -> pb.Job:
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def after(stub: pb_grpc.JobServiceStub, tenant: str, name: str, *upstreams: str,
          condition: pb.DependencyCondition.ValueType = pb.DEPENDENCY_CONDITION_SUCCESS,
          ) -> pb.Job:
    spec = pb.JobSpec(name=name, tenant=tenant, handler="echo", payload=b"{}",
                      after=pb.Dependency(job_ids=list(upstreams), condition=condition))
    return create(stub, spec)


def one_off(stub: pb_grpc.JobServiceStub, tenant: str, name: str, handler: str = "echo",
            payload: bytes = b"{}", in_seconds: float = 4) -> pb.Job:
    spec = pb.JobSpec(name=name, tenant=tenant, handler=handler, payload=payload)
    spec.at.FromDatetime(datetime.now(UTC) + timedelta(seconds=in_seconds))
    spec.retry_policy.max_attempts = 1
    return create(stub, spec)


def runs_of(stub: pb_grpc.JobServiceStub, job_id: str) -> list[pb.Run]:
    return list(stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=100),
                              timeout=10).runs)


def ended_run(stub: pb_grpc.JobServiceStub, job_id: str, status: int,
              seconds: float = 60) -> pb.Run:
    def found() -> pb.Run | None:
        runs = [r for r in runs_of(stub, job_id) if r.status == status]
        return runs[0] if runs else None
    return wait_for(found, seconds, f"a run of {job_id} in status {status}")


def test_a_chain_with_a_fan_in_runs_once_per_upstream_run_with_one_logical_time(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "dep-" + uuid.uuid4().hex[:6]
    a = one_off(stub, tenant, "a", in_seconds=6)
    b = after(stub, tenant, "b", a.job_id)
    c = after(stub, tenant, "c", b.job_id)
    d = after(stub, tenant, "d", b.job_id, c.job_id)
    assert sorted(d.spec.after.job_ids) == sorted([b.job_id, c.job_id])
    assert d.status == pb.JOB_STATUS_ACTIVE
    run_a = ended_run(stub, a.job_id, pb.RUN_STATUS_SUCCEEDED)
    run_b = ended_run(stub, b.job_id, pb.RUN_STATUS_SUCCEEDED)
    run_c = ended_run(stub, c.job_id, pb.RUN_STATUS_SUCCEEDED)
    run_d = ended_run(stub, d.job_id, pb.RUN_STATUS_SUCCEEDED)
    fire_time = run_a.scheduled_at.ToDatetime(tzinfo=UTC)
    for run, upstreams, depth in ((run_b, [run_a.run_id], 1), (run_c, [run_b.run_id], 2),
                                  (run_d, [run_b.run_id, run_c.run_id], 3)):
        assert run.trigger == "dependency"
        assert run.logical_time.ToDatetime(tzinfo=UTC) == fire_time, "one logical time"
        assert sorted(run.upstream_run_ids) == sorted(upstreams)
        assert run.depth == depth
    # Exactly once each: nothing more comes.
    with pytest.raises(TimedOut):
        wait_for(lambda: len(runs_of(stub, d.job_id)) > 1 or len(runs_of(stub, b.job_id)) > 1,
                 3, "a second dependent run")
    # The audit, from the log alone, says why D's run exists.
    settings = service.settings
    assert isinstance(settings, Settings)
    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", "audit",
                           "job", d.job_id], env={**os.environ, **settings_env(settings)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    why = done.stdout[done.stdout.index(f"run {run_d.run_id} scheduled"):]
    assert f"logical time {fire_time.isoformat()}" in why and "depth 3" in why, done.stdout
    for upstream, job in ((run_b.run_id, b.job_id), (run_c.run_id, c.job_id)):
        assert f"upstream run {upstream}: job {job} ended succeeded" in why, done.stdout


def test_on_failure_an_alert_job_runs_and_an_on_success_dependent_does_not(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "dep-" + uuid.uuid4().hex[:6]
    a = one_off(stub, tenant, "failing", handler="fail", payload=b'{"times": 5}', in_seconds=6)
    alert = after(stub, tenant, "alert", a.job_id,
                  condition=pb.DEPENDENCY_CONDITION_FAILURE)
    report = after(stub, tenant, "report", a.job_id)
    ended_run(stub, a.job_id, pb.RUN_STATUS_DEAD_LETTERED)
    run = ended_run(stub, alert.job_id, pb.RUN_STATUS_SUCCEEDED)
    assert run.trigger == "dependency" and run.depth == 1
    # The end that closed report's logical time went out in the same transaction as the
    # one that made alert's run: by now it has been decided.
    with pytest.raises(TimedOut):
        wait_for(lambda: runs_of(stub, report.job_id), 3, "a run of the on-success job")


def test_a_cascading_trigger_reruns_the_chain_and_a_plain_one_does_not(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "dep-" + uuid.uuid4().hex[:6]
    spec = pb.JobSpec(name="nightly", tenant=tenant, handler="echo", payload=b"{}",
                      cron="0 0 1 1 *")
    a = create(stub, spec)
    b = after(stub, tenant, "b", a.job_id)
    stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=a.job_id), timeout=30)
    cascading_id = rid()
    stub.TriggerJob(pb.TriggerJobRequest(request_id=cascading_id, job_id=a.job_id,
                                         cascade=True), timeout=30)
    run_b = ended_run(stub, b.job_id, pb.RUN_STATUS_SUCCEEDED)
    assert run_b.cascade == cascading_id
    wait_for(lambda: len([r for r in runs_of(stub, a.job_id)
                          if r.status == pb.RUN_STATUS_SUCCEEDED]) == 2, 30,
             "both triggered runs of the upstream ended")
    with pytest.raises(TimedOut):
        wait_for(lambda: len(runs_of(stub, b.job_id)) > 1, 3, "a run after the plain trigger")


def test_an_upstream_with_dependents_cannot_be_deleted_until_they_go(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    tenant = "dep-" + uuid.uuid4().hex[:6]
    spec = pb.JobSpec(name="up", tenant=tenant, handler="echo", cron="0 0 1 1 *")
    a = create(stub, spec)
    b = after(stub, tenant, "down", a.job_id)

    # B's create sent the link to A's inbox partition before it was answered, so the link
    # is ahead of this deletion in A's partition: refused at once.
    with pytest.raises(grpc.RpcError) as refused:
        stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=a.job_id), timeout=30)
    error = refused.value
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert b.job_id in (error.details() or "")
    stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=b.job_id), timeout=30)
    wait_for(lambda: _deletes(stub, a.job_id), 10, "the upstream deleted once unlinked")


def _deletes(stub: pb_grpc.JobServiceStub, job_id: str) -> bool:
    try:
        stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=job_id), timeout=30)
        return True
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
            raise
        return False
