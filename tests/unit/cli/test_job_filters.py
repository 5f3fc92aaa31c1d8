"""`cronlog jobs list` turns its filter options into ListJobs' fields."""

from __future__ import annotations

import pytest

from cronlog.cli.job_filters import list_jobs_request
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb


def test_filter_options_become_the_requests_fields() -> None:
    args = _parser().parse_args([
        "jobs", "list", "--status", "paused", "--status", "completed", "--queue", "batch",
        "--label", "team=data", "--label", "tier", "--label", "expr=a=b", "--label", "empty=",
        "--name", "Report", "--page-size", "7"])
    request = list_jobs_request(args)
    assert list(request.statuses) == [pb.JOB_STATUS_PAUSED, pb.JOB_STATUS_COMPLETED]
    assert request.queue == "batch" and request.name_contains == "Report"
    assert request.page_size == 7
    assert [(s.key, s.value if s.HasField("value") else None) for s in request.labels] == [
        ("team", "data"), ("tier", None), ("expr", "a=b"), ("empty", "")]


def test_without_filters_the_request_has_none() -> None:
    request = list_jobs_request(_parser().parse_args(["jobs", "list"]))
    assert request == pb.ListJobsRequest(page_size=100)


def test_a_deleted_status_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["jobs", "list", "--status", "deleted"])
    assert "--status" in capsys.readouterr().err
