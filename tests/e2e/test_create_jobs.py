"""CreateJobs and `cronlog jobs import` against the real service: per-item outcomes,
idempotent re-sends, the batch's bounds, and the CLI's summary and progress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import cast

import grpc
import pytest

from cronlog.domain.ids import job_id_for_request
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

TENANT = "bulk-" + uuid.uuid4().hex[:8]
# A schedule that does not fire during the test.
YEARLY = "0 0 1 1 *"


def spec(name: str, **fields: object) -> pb.JobSpec:
    values: dict[str, object] = {"name": name, "tenant": TENANT, "handler": "echo",
                                 "cron": YEARLY, **fields}
    return pb.JobSpec(**values)  # type: ignore[arg-type]


def visible(stub: pb_grpc.JobServiceStub, job_id: str) -> pb.Job | None:
    try:
        return stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10).job
    except grpc.RpcError:
        return None


def missing(stub: pb_grpc.JobServiceStub, job_id: str) -> bool:
    try:
        stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10)
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.NOT_FOUND
    return False


def test_good_items_are_created_and_bad_ones_fail_alone(stub: pb_grpc.JobServiceStub) -> None:
    items = [
        pb.CreateJobRequest(request_id=rid(), spec=spec("good-cron")),
        pb.CreateJobRequest(request_id=rid(), spec=spec("bad-cron", cron="61 * * * *")),
        pb.CreateJobRequest(request_id="", spec=spec("no-request-id")),
        pb.CreateJobRequest(request_id=rid(), spec=spec("bad-queue", queue="nowhere")),
        pb.CreateJobRequest(request_id=rid()),
        pb.CreateJobRequest(request_id=rid(), spec=spec("good-zone", time_zone="Asia/Tokyo")),
    ]
    results = stub.CreateJobs(pb.CreateJobsRequest(items=items), timeout=30).results
    assert [r.request_id for r in results] == [i.request_id for i in items]
    assert [r.WhichOneof("outcome") for r in results] == [
        "job", "error", "error", "error", "error", "job"]
    errors = {i: (r.error.code, r.error.field) for i, r in enumerate(results)
              if r.HasField("error")}
    assert errors == {1: ("INVALID_ARGUMENT", "items[1].spec.schedule.cron"),
                      2: ("INVALID_ARGUMENT", "items[2].request_id"),
                      3: ("INVALID_ARGUMENT", "items[3].spec.queue"),
                      4: ("INVALID_ARGUMENT", "items[4].spec")}
    for index in (0, 5):
        created = results[index].job
        assert not created.already_existed and created.version >= 1
        assert created.job_id == str(job_id_for_request(TENANT, items[index].request_id))
        job = wait_for(partial(visible, stub, created.job_id), 30, "a batch's job")
        assert job.spec.name == items[index].spec.name
    for index in (1, 3):
        assert missing(stub, str(job_id_for_request(TENANT, items[index].request_id)))


def test_a_batch_sent_again_creates_nothing_new(stub: pb_grpc.JobServiceStub) -> None:
    items = [pb.CreateJobRequest(request_id=rid(), spec=spec(f"again-{n}")) for n in range(50)]
    first = stub.CreateJobs(pb.CreateJobsRequest(items=items), timeout=30).results
    again = stub.CreateJobs(pb.CreateJobsRequest(items=items), timeout=30).results
    assert all(r.HasField("job") and not r.job.already_existed for r in first)
    assert all(r.HasField("job") and r.job.already_existed for r in again)
    assert [r.job.job_id for r in again] == [r.job.job_id for r in first]
    assert [r.job.version for r in again] == [r.job.version for r in first]

    # The same id with another spec is refused by the job's owner, for that item alone.
    changed = pb.CreateJobRequest(request_id=items[0].request_id, spec=spec("another"))
    fresh = pb.CreateJobRequest(request_id=rid(), spec=spec("fresh"))
    mixed = stub.CreateJobs(pb.CreateJobsRequest(items=[changed, fresh]), timeout=30).results
    assert (mixed[0].error.code, mixed[0].error.field) == (
        "INVALID_ARGUMENT", "items[0].request_id")
    assert mixed[1].HasField("job") and not mixed[1].job.already_existed


def refusal(stub: pb_grpc.JobServiceStub, request: pb.CreateJobsRequest) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        stub.CreateJobs(request, timeout=30)
    return raised.value


def field_of(error: grpc.RpcError) -> str | None:
    trailing = cast("Iterable[tuple[str, str | bytes]]", error.trailing_metadata() or ())
    return str(dict(trailing).get("cronlog-field"))


def test_a_batch_over_its_bounds_is_refused_whole(stub: pb_grpc.JobServiceStub) -> None:
    many = [pb.CreateJobRequest(request_id=rid(), spec=spec(f"many-{n}")) for n in range(1001)]
    error = refusal(stub, pb.CreateJobsRequest(items=many))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_of(error) == "items" and "1000" in (error.details() or "")

    # 13 payloads of 250 KiB: every item within its own bounds, the batch over 3 MiB.
    big = [pb.CreateJobRequest(request_id=rid(), spec=spec(f"big-{n}", payload=b"x" * 250_000))
           for n in range(13)]
    error = refusal(stub, pb.CreateJobsRequest(items=big))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_of(error) == "items"
    for item in (many[0], big[0]):
        assert missing(stub, str(job_id_for_request(TENANT, item.request_id)))


def import_file(service: RunningService, path: Path, *extra: str
                ) -> subprocess.CompletedProcess[str]:
    cronlog = Path(sys.executable).with_name("cronlog")
    env = {k: v for k, v in os.environ.items() if k != "CRONLOG_TOKEN"}
    return subprocess.run([str(cronlog), "jobs", "import", str(path), "--address",
                           service.address, *extra], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_import_reports_each_line_and_is_idempotent(service: RunningService,
                                                        tmp_path: Path) -> None:
    tenant = "import-" + uuid.uuid4().hex[:8]
    good = [{"name": f"imported-{n}", "handler": "echo", "cron": YEARLY} for n in range(120)]
    lines = [json.dumps(g) for g in good]
    lines.insert(3, "{not json")
    lines.insert(7, json.dumps({"name": "bad", "handler": "echo", "cron": "0 0 30 2 *"}))
    lines.insert(9, json.dumps(good[0], indent=None, separators=(", ", " : ")))  # the same job
    lines.insert(11, "")
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(lines) + "\n")

    first = import_file(service, path, "--tenant", tenant, "--batch-size", "50")
    assert first.returncode == 1, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["created"], summary["already_existed"], summary["duplicates"],
            summary["failed"]) == (120, 0, 1, 2)
    assert [(f["line"], f["field"]) for f in summary["failures"]] == [
        (4, "line"), (8, "spec.schedule.cron")]
    assert "123/123 lines" in first.stderr, first.stderr

    again = import_file(service, path, "--tenant", tenant, "-o", "table", "--quiet")
    assert again.returncode == 1
    assert "created: 0" in again.stdout and "already existed: 120" in again.stdout
    assert "line 8: INVALID_ARGUMENT" in again.stdout and again.stderr == ""

    def all_listed() -> bool:
        stub = pb_grpc.JobServiceStub(service.channel)
        listed = stub.ListJobs(pb.ListJobsRequest(tenant=tenant, page_size=1000),
                               timeout=10).jobs
        return sorted(j.spec.name for j in listed) == sorted(g["name"] for g in good)

    wait_for(all_listed, 30, "the imported jobs, each once")
