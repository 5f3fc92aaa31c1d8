"""RestoreJob against the real service (issue 38): a deleted job comes back with the spec of
the version asked for, as a new version that names it; it fires again; its audit shows the
restore and `cronlog verify` proves its fire times through the delete and the restore. A
version it never had, or a job that does not exist, is refused (another tenant's job:
test_tenancy.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.processes import settings_env
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e


def cli(service: RunningService, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, **settings_env(service.settings),
                               "CRONLOG_GRPC_ADDRESS": service.address})


def runs_after(stub: pb_grpc.JobServiceStub, job_id: str, after: datetime) -> list[pb.Run]:
    runs = stub.ListRuns(pb.ListRunsRequest(job_id=job_id, page_size=500), timeout=10).runs
    return [r for r in runs if r.status == pb.RUN_STATUS_SUCCEEDED
            and r.scheduled_at.ToDatetime(UTC) > after]


def test_a_deleted_job_comes_back_with_an_earlier_spec_and_verify_proves_it(
        service: RunningService, stub: pb_grpc.JobServiceStub) -> None:
    tenant = "restore-" + uuid.uuid4().hex[:6]
    began = datetime.now(UTC).replace(microsecond=0)
    spec = pb.JobSpec(name="nightly-billing", tenant=tenant, handler="echo", payload=b"v1",
                      cron="*/2 * * * * *")
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec), timeout=30).job
    wait_for(lambda: runs_after(stub, job.job_id, began), 30, "a run of version 1")
    spec.payload = b"v2"
    updated = stub.UpdateJob(pb.UpdateJobRequest(request_id=rid(), job_id=job.job_id,
                                                 spec=spec), timeout=30).job
    # A version is the number of the event that last changed the spec or the status.
    assert updated.version > job.version == 1 and updated.spec.payload == b"v2"
    deleted = stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=job.job_id),
                             timeout=30).job
    assert deleted.status == pb.JOB_STATUS_DELETED

    # Refused before anything is sent: a version it never had, named.
    with pytest.raises(grpc.RpcError) as refused:
        stub.RestoreJob(pb.RestoreJobRequest(request_id=rid(), job_id=job.job_id,
                                             version=deleted.version + 1), timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (refused.value.details() or "").startswith("version"), refused.value.details()

    # Through the CLI, as an operator would: version 1's spec, fire times since skipped.
    done = cli(service, "jobs", "restore", job.job_id, "--version", "1", "--skip-missed")
    assert done.returncode == 0, done.stdout + done.stderr
    restored = json.loads(done.stdout)["job"]
    assert restored["status"] == "JOB_STATUS_ACTIVE"
    assert int(restored["version"]) == deleted.version + 1
    back = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
    assert back.spec.payload == b"v1", "the spec of version 1"
    restored_at = datetime.now(UTC)
    run = wait_for(lambda: runs_after(stub, job.job_id, restored_at), 30,
                   "a run after the restore")[0]
    full = stub.GetRun(pb.GetRunRequest(run_id=run.run_id), timeout=10).run
    assert full.attempts[0].output == b"v1", "it runs the restored spec"

    # A restore of the live job rolls it back to the version of the update.
    again = stub.RestoreJob(pb.RestoreJobRequest(request_id=rid(), job_id=job.job_id,
                                                 version=updated.version), timeout=30).job
    assert again.spec.payload == b"v2" and again.status == pb.JOB_STATUS_ACTIVE
    stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=job.job_id), timeout=30)

    audit = cli(service, "audit", "job", job.job_id)
    assert audit.returncode == 0, audit.stderr
    restores = [line for line in audit.stdout.splitlines() if "JobRestored" in line]
    assert len(restores) == 2, audit.stdout
    assert "restored_version=1" in restores[0] and "skip_missed=True" in restores[0]

    proof = cli(service, "verify", "--since", (began - timedelta(seconds=5)).isoformat(),
                "--job", job.job_id, "--settle", "5s")
    assert proof.returncode == 0, proof.stdout + proof.stderr


def test_a_job_that_does_not_exist_is_not_found(stub: pb_grpc.JobServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as missing:
        stub.RestoreJob(pb.RestoreJobRequest(request_id=rid(), job_id=str(uuid.uuid4()),
                                             version=1), timeout=30)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
