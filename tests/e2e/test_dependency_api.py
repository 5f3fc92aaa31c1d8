"""Issue 16 at the api, over gRPC against the real service: a job's `after` is shown by
GetJob and ListJobs, and every `after` the api must refuse — a cycle, an upstream that is
missing or another tenant's, the job itself, 17 upstreams, bounds beside `after` — is
INVALID_ARGUMENT naming the field, with nothing written. Whether dependent runs fire is the
owner's part (other tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import cast

import grpc
import pytest

from cronlog.domain.ids import job_id_for_request
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

TENANT = "deps-" + uuid.uuid4().hex[:6]
OTHER = "deps-other-" + uuid.uuid4().hex[:6]
FIELD = "spec.after.job_ids"


def cron_spec(tenant: str = TENANT) -> pb.JobSpec:
    return pb.JobSpec(name="upstream", tenant=tenant, handler="echo", cron="0 2 * * *")


def after_spec(*job_ids: str, tenant: str = TENANT) -> pb.JobSpec:
    return pb.JobSpec(name="dependent", tenant=tenant, handler="echo",
                      after=pb.Dependency(job_ids=list(job_ids)))


def create(stub: pb_grpc.JobServiceStub, spec: pb.JobSpec) -> pb.Job:
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job


def update(stub: pb_grpc.JobServiceStub, job: pb.Job, spec: pb.JobSpec) -> pb.Job:
    return stub.UpdateJob(pb.UpdateJobRequest(request_id=rid(), job_id=job.job_id,
                                              expected_version=job.version, spec=spec),
                          timeout=30).job


def refused(call: Callable[[], object], field: str = FIELD) -> str:
    """The RPC fails INVALID_ARGUMENT naming `field` in its message and trailing metadata;
    returns the message."""
    with pytest.raises(grpc.RpcError) as caught:
        call()
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, f"{error.code()}: {error.details()}"
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    pairs = cast("Iterable[tuple[str, str]]", error.trailing_metadata() or ())
    trailing = dict(pairs)
    assert trailing.get("cronlog-field") == field, trailing
    details: str = error.details() or ""
    assert details.startswith(field), details
    return details


def refused_create(stub: pb_grpc.JobServiceStub, spec: pb.JobSpec) -> str:
    return refused(lambda: create(stub, spec))


def current(stub: pb_grpc.JobServiceStub, job: pb.Job) -> pb.Job:
    return stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job


def unchanged(stub: pb_grpc.JobServiceStub, job: pb.Job) -> None:
    now = current(stub, job)
    assert (now.version, now.spec) == (job.version, job.spec), "a refusal writes nothing"


def test_get_and_list_show_after(stub: pb_grpc.JobServiceStub) -> None:
    a = create(stub, cron_spec())
    b = create(stub, after_spec(a.job_id))
    assert b.spec.WhichOneof("schedule") == "after"
    assert list(b.spec.after.job_ids) == [a.job_id]
    assert b.spec.after.condition == pb.DEPENDENCY_CONDITION_SUCCESS
    assert b.spec.after.wait_window.seconds == 3600
    assert b.status == pb.JOB_STATUS_ACTIVE and not b.HasField("next_fire_at")
    got = stub.GetJob(pb.GetJobRequest(job_id=b.job_id), timeout=10).job
    assert got.spec.after == b.spec.after
    listed = stub.ListJobs(pb.ListJobsRequest(tenant=TENANT, page_size=1000), timeout=10).jobs
    assert [j.spec.after for j in listed if j.job_id == b.job_id] == [b.spec.after]


def test_a_cycle_is_refused_naming_it(stub: pb_grpc.JobServiceStub) -> None:
    a = create(stub, cron_spec())
    b = create(stub, after_spec(a.job_id))
    details = refused(lambda: update(stub, a, after_spec(b.job_id)))
    assert f"{a.job_id} runs after {b.job_id} runs after {a.job_id}" in details
    c = create(stub, after_spec(b.job_id))
    details = refused(lambda: update(stub, a, after_spec(c.job_id)))
    assert (f"{a.job_id} runs after {c.job_id} runs after {b.job_id} runs after {a.job_id}"
            in details)
    # A's version moves as its dependents are linked to it; its spec is what matters here.
    assert current(stub, a).spec == a.spec, "a refusal writes nothing"
    # B's link reaches A through A's owner, a moment after B's creation: GetJob shows it.
    wait_for(lambda: list(current(stub, a).dependent_job_ids) == [b.job_id], 30,
             "A showing B as its dependent")
    # A may follow a job outside the chain below it.
    d = create(stub, cron_spec())
    moved = update(stub, current(stub, a), after_spec(d.job_id))
    assert list(moved.spec.after.job_ids) == [d.job_id]


def test_a_missing_upstream_and_another_tenants_get_the_same_answer(
        stub: pb_grpc.JobServiceStub) -> None:
    theirs = create(stub, cron_spec(OTHER))
    missing = str(uuid.uuid4())
    answers = [refused_create(stub, after_spec(job_id)).replace(job_id, "<id>")
               for job_id in (theirs.job_id, missing)]
    assert answers[0] == answers[1] == f"{FIELD}: job <id> not found"
    mine = create(stub, cron_spec())
    assert refused(lambda: update(stub, mine, after_spec(theirs.job_id))) == (
        f"{FIELD}: job {theirs.job_id} not found")
    unchanged(stub, mine)


def test_a_deleted_upstream_is_not_found(stub: pb_grpc.JobServiceStub) -> None:
    gone = create(stub, cron_spec())
    stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=gone.job_id), timeout=30)
    assert refused(lambda: create(stub, after_spec(gone.job_id))).endswith("not found")


def test_a_job_cannot_run_after_itself(stub: pb_grpc.JobServiceStub) -> None:
    request_id = rid()
    own = str(job_id_for_request(TENANT, request_id))
    details = refused(lambda: stub.CreateJob(pb.CreateJobRequest(
        request_id=request_id, spec=after_spec(own)), timeout=30))
    assert "itself" in details
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetJob(pb.GetJobRequest(job_id=own), timeout=10)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND, "nothing was created"
    job = create(stub, cron_spec())
    assert "itself" in refused(lambda: update(stub, job, after_spec(job.job_id)))
    unchanged(stub, job)


def test_seventeen_upstreams_are_refused(stub: pb_grpc.JobServiceStub) -> None:
    ids = [str(uuid.uuid4()) for _ in range(17)]
    assert "at most 16 upstream jobs, got 17" in refused(
        lambda: create(stub, after_spec(*ids)))


@pytest.mark.parametrize("bound", ["start_at", "end_at"])
def test_after_with_bounds_is_refused(stub: pb_grpc.JobServiceStub, bound: str) -> None:
    upstream = create(stub, cron_spec())
    spec = after_spec(upstream.job_id)
    getattr(spec, bound).FromSeconds(1_900_000_000)
    refused(lambda: create(stub, spec), f"spec.{bound}")
    zoned = after_spec(upstream.job_id)
    zoned.time_zone = "Europe/Berlin"
    refused(lambda: create(stub, zoned), "spec.time_zone")


def run_cli(service: RunningService, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli",
                           "--address", service.address, *args],
                          capture_output=True, text=True, timeout=90)


def test_the_cli_creates_a_dependent_and_cascades_a_trigger(
        service: RunningService, stub: pb_grpc.JobServiceStub) -> None:
    upstream = create(stub, cron_spec())
    made = run_cli(service, "jobs", "create", "--name", "report", "--tenant", TENANT,
                   "--handler", "echo", "--after", upstream.job_id, "--on", "failure",
                   "--wait-window", "1h30m", "-o", "table")
    assert made.returncode == 0, made.stderr
    job_part, after_part = made.stdout.split("\n\n")
    assert "after 1 job on failure" in job_part
    assert after_part.splitlines()[1].split() == [upstream.job_id, "failure", "5400.000s"]
    refused_cli = run_cli(service, "jobs", "create", "--name", "r", "--tenant", TENANT,
                          "--handler", "echo", "--after", str(uuid.uuid4()))
    assert refused_cli.returncode == 1 and "(field: spec.after.job_ids)" in refused_cli.stderr
    triggered = run_cli(service, "jobs", "trigger", upstream.job_id, "--cascade",
                        "--request-id", "cascade-1")
    assert triggered.returncode == 0, triggered.stderr
    run = json.loads(triggered.stdout)["run"]
    assert (run["trigger"], run["cascade"]) == ("manual", "cascade-1")
    assert run["logical_time"] == run["scheduled_at"]

    def from_history() -> pb.Run | None:
        try:
            return stub.GetRun(pb.GetRunRequest(run_id=run["run_id"]), timeout=10).run
        except grpc.RpcError:
            return None
    stored = wait_for(from_history, 30, "the cascading run in the history")
    assert (stored.cascade, stored.depth, list(stored.upstream_run_ids)) == ("cascade-1", 0, [])
    assert stored.logical_time == stored.scheduled_at
