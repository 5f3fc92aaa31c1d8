"""ListJobs' filters over gRPC against the whole service with two tenants' tokens: status,
queue, label and name select what the jobs are now, page with their token, never show
another tenant's job; a bad filter is INVALID_ARGUMENT naming its field; the CLI's
`jobs list` options reach them, with its token from CRONLOG_TOKEN or CRONLOG_TOKEN_FILE."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

ALPHA_TOKEN = "alpha-" + uuid.uuid4().hex
BETA_TOKEN = "beta-" + uuid.uuid4().hex
A = (("authorization", f"Bearer {ALPHA_TOKEN}"),)
B = (("authorization", f"Bearer {BETA_TOKEN}"),)


SERVICE_ROLES = ("api", "scheduler")
SERVICE_ENV = {"CRONLOG_TENANT_TOKENS": f"alpha={ALPHA_TOKEN},beta={BETA_TOKEN}"}
SERVICE_OVERRIDES = dict(queues=("default", "batch"),
                         # Tokens are on: a queue is closed unless shared (docs/security.md).
                         shared_queues=("default", "batch"))


def create(stub: pb_grpc.JobServiceStub, metadata: tuple[tuple[str, str], ...], name: str,
           queue: str = "default", labels: dict[str, str] | None = None) -> pb.Job:
    spec = pb.JobSpec(name=name, queue=queue, handler="echo", cron="0 0 1 1 *",
                      labels=labels or {})
    return stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                          timeout=30, metadata=metadata).job


@pytest.fixture(scope="module")
def jobs(stub: pb_grpc.JobServiceStub) -> dict[str, pb.Job]:
    made = {
        "report": create(stub, A, "Nightly report", "batch", {"team": "data"}),
        "sync": create(stub, A, "hourly sync", labels={"team": "ops"}),
        "cleanup": create(stub, A, "cleanup_100", "batch"),
        "beta": create(stub, B, "beta report", "batch", {"team": "data"}),
    }
    stub.PauseJob(pb.PauseJobRequest(request_id=str(uuid.uuid4()),
                                     job_id=made["cleanup"].job_id), timeout=30, metadata=A)

    def paused_listed() -> bool:
        found = stub.ListJobs(pb.ListJobsRequest(statuses=[pb.JOB_STATUS_PAUSED]), timeout=10,
                              metadata=A).jobs
        return [j.job_id for j in found] == [made["cleanup"].job_id]

    wait_for(paused_listed, 30, "the paused job listed as paused")
    return made


def listed(stub: pb_grpc.JobServiceStub, metadata: tuple[tuple[str, str], ...],
           **filters: object) -> list[str]:
    found = stub.ListJobs(pb.ListJobsRequest(**filters), timeout=10,  # type: ignore[arg-type]
                          metadata=metadata).jobs
    return [j.spec.name for j in found]


def test_each_filter_selects_the_callers_jobs(stub: pb_grpc.JobServiceStub,
                                              jobs: dict[str, pb.Job]) -> None:
    assert listed(stub, A, queue="batch") == ["Nightly report", "cleanup_100"]
    assert listed(stub, A, statuses=[pb.JOB_STATUS_ACTIVE]) == ["Nightly report",
                                                                "hourly sync"]
    assert listed(stub, A, labels=[pb.LabelSelector(key="team", value="data")]) == [
        "Nightly report"]
    assert listed(stub, A, labels=[pb.LabelSelector(key="team")]) == ["Nightly report",
                                                                      "hourly sync"]
    assert listed(stub, A, name_contains="REPORT") == ["Nightly report"]
    assert listed(stub, A, name_contains="p_1") == ["cleanup_100"]
    assert listed(stub, A, name_contains="%") == []
    assert listed(stub, A, queue="batch", statuses=[pb.JOB_STATUS_PAUSED],
                  name_contains="clean") == ["cleanup_100"]
    # Beta's matching job is beta's alone, and alpha's are not beta's.
    assert listed(stub, B, queue="batch") == ["beta report"]
    assert listed(stub, B, labels=[pb.LabelSelector(key="team", value="data")]) == [
        "beta report"]
    assert listed(stub, A, name_contains="beta") == []


def test_a_filtered_list_pages_with_its_token(stub: pb_grpc.JobServiceStub,
                                              jobs: dict[str, pb.Job]) -> None:
    first = stub.ListJobs(pb.ListJobsRequest(queue="batch", page_size=1), timeout=10,
                          metadata=A)
    assert [j.spec.name for j in first.jobs] == ["Nightly report"] and first.next_page_token
    second = stub.ListJobs(pb.ListJobsRequest(queue="batch", page_size=1,
                                              page_token=first.next_page_token),
                           timeout=10, metadata=A)
    assert [j.spec.name for j in second.jobs] == ["cleanup_100"]


@pytest.mark.parametrize(("request_", "field"), [
    (pb.ListJobsRequest(statuses=[pb.JOB_STATUS_DELETED]), "statuses"),
    (pb.ListJobsRequest(statuses=[pb.JobStatus.ValueType(42)]), "statuses"),
    (pb.ListJobsRequest(queue="not a queue"), "queue"),
    (pb.ListJobsRequest(name_contains="n" * 201), "name_contains"),
    (pb.ListJobsRequest(name_contains="a\x00b"), "name_contains"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="")]), "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key="k", value="v" * 257)]), "labels"),
    (pb.ListJobsRequest(labels=[pb.LabelSelector(key=f"k{n}") for n in range(65)]), "labels"),
])
def test_a_bad_filter_is_refused_naming_its_field(stub: pb_grpc.JobServiceStub,
                                                  request_: pb.ListJobsRequest,
                                                  field: str) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        stub.ListJobs(request_, timeout=10, metadata=A)
    error: Any = refused.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(error.trailing_metadata() or ()).get("cronlog-field") == field


def test_the_cli_lists_with_filters(service: RunningService, jobs: dict[str, pb.Job]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "--address", service.address,
         "jobs", "list", "--queue", "batch", "--status", "active", "--label", "team=data",
         "--name", "nightly"],
        capture_output=True, text=True, timeout=90,
        env={**os.environ, "CRONLOG_TOKEN": ALPHA_TOKEN})
    assert done.returncode == 0, done.stderr
    assert [j["job_id"] for j in json.loads(done.stdout)["jobs"]] == [jobs["report"].job_id]


def test_the_cli_reads_its_token_from_the_file_cronlog_token_file_names(
        service: RunningService, jobs: dict[str, pb.Job], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(ALPHA_TOKEN + "\n")  # as `echo` writes it
    env = {k: v for k, v in os.environ.items() if k != "CRONLOG_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "--address", service.address,
         "jobs", "list", "--queue", "batch", "--label", "team=data", "--name", "nightly"],
        capture_output=True, text=True, timeout=90,
        env={**env, "CRONLOG_TOKEN_FILE": str(token_file)})
    assert done.returncode == 0, done.stderr
    assert [j["job_id"] for j in json.loads(done.stdout)["jobs"]] == [jobs["report"].job_id]


def test_a_page_of_large_jobs_is_cut_to_what_one_response_may_carry(
        stub: pb_grpc.JobServiceStub) -> None:
    # Eighteen jobs of a 256 KiB payload are 4.5 MiB: more than one gRPC response carries.
    tag = uuid.uuid4().hex[:8]
    made = set()
    for n in range(18):
        spec = pb.JobSpec(name=f"big-{tag}-{n}", handler="echo", cron="0 0 1 1 *",
                          payload=bytes([n]) * (256 * 1024))
        made.add(stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                                timeout=30, metadata=B).job.job_id)
    pages: list[list[str]] = []
    token = ""
    while True:
        page = stub.ListJobs(pb.ListJobsRequest(page_size=1000, page_token=token,
                                                name_contains=f"big-{tag}"),
                             timeout=30, metadata=B)
        pages.append([j.job_id for j in page.jobs])
        token = page.next_page_token
        if not token:
            break
        assert len(pages) < 10, "the pages end"
    listed = [job_id for page in pages for job_id in page]
    assert len(pages) >= 2, "cut by size, not by the page size asked for"
    assert sorted(listed) == sorted(made), "each job once, none lost between pages"
