"""`cronlog jobs import`: lines to requests, request ids from content, batches, and the
summary with line numbers."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from cronlog.cli import importing as imp
from cronlog.client import CronlogClient, Retries
from cronlog.v1 import job_service_pb2 as pb

LINE = {"name": "nightly", "tenant": "acme", "handler": "echo", "cron": "0 2 * * *"}


def test_the_request_id_is_the_content_however_the_line_is_formatted() -> None:
    compact = imp.parse_line(1, json.dumps(LINE, separators=(",", ":")), None)
    spaced = imp.parse_line(9, json.dumps(dict(reversed(list(LINE.items()))), indent=None,
                                          separators=(" , ", " : ")), None)
    other = imp.parse_line(1, json.dumps({**LINE, "cron": "0 3 * * *"}), None)
    assert isinstance(compact, imp.ImportLine) and isinstance(spaced, imp.ImportLine)
    assert isinstance(other, imp.ImportLine)
    assert compact.request_id == spaced.request_id != other.request_id
    assert compact.request_id.startswith("import-") and len(compact.request_id) <= 200
    assert compact.spec == pb.JobSpec(**LINE)  # type: ignore[arg-type]


def test_the_default_tenant_fills_a_line_without_one_and_keeps_its_request_id() -> None:
    without = {k: v for k, v in LINE.items() if k != "tenant"}
    line = imp.parse_line(1, json.dumps(without), "beta")
    named = imp.parse_line(1, json.dumps(LINE), "beta")
    assert isinstance(line, imp.ImportLine) and isinstance(named, imp.ImportLine)
    assert line.spec.tenant == "beta" and named.spec.tenant == "acme"
    assert line.request_id == imp.request_id_of(without)


@pytest.mark.parametrize(("text", "field"), [
    ("{not json", "line"), ("[1, 2]", "line"), ('"text"', "line"),
    ('{"name": "x", "cronn": "* * * * *"}', "spec"), ('{"retry_policy": 3}', "spec"),
])
def test_a_line_that_is_not_a_job_spec_fails_alone(text: str, field: str) -> None:
    failure = imp.parse_line(7, text, None)
    assert isinstance(failure, imp.LineFailure)
    assert (failure.number, failure.code, failure.field) == (7, "INVALID_ARGUMENT", field)


def test_lines_are_numbered_as_editors_do_and_blank_ones_skipped() -> None:
    parsed = list(imp.read_lines(["", json.dumps(LINE), "   ", "{bad"], None))
    assert [p.number for p in parsed] == [2, 4]


def lines(count: int, payload: int = 0) -> list[imp.ImportLine]:
    return [imp.ImportLine(n, f"r{n}", pb.JobSpec(name=f"j{n}", payload=b"x" * payload))
            for n in range(1, count + 1)]


def test_batches_hold_at_most_the_items_and_about_the_bytes_asked() -> None:
    assert [len(b) for b in imp.batches(iter(lines(7)), 3)] == [3, 3, 1]
    sized = list(imp.batches(iter(lines(5, payload=400_000)), 1000, most_bytes=1_000_000))
    assert [len(b) for b in sized] == [2, 2, 1]
    # One line larger than the byte bound still goes, alone.
    assert [len(b) for b in imp.batches(iter(lines(2, payload=2000)), 10, 1000)] == [1, 1]


def test_an_items_field_becomes_the_lines() -> None:
    line = lines(1)[0]
    failure = imp.item_failure(line, pb.ItemError(code="INVALID_ARGUMENT", message="bad",
                                                  field="items[41].spec.schedule.cron"))
    assert (failure.number, failure.field, failure.request_id) == (
        1, "spec.schedule.cron", "r1")
    assert imp.item_failure(line, pb.ItemError(code="UNAVAILABLE")).field == ""


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "api restarting"


class Stub:
    """Answers like the api: a line whose name starts with `bad` fails, the first call can
    be made to fail with UNAVAILABLE; remembers every request id it was sent."""

    def __init__(self, existing: set[str] | None = None, unavailable: int = 0) -> None:
        self.existing = existing or set()
        self.unavailable = unavailable
        self.sent: list[list[str]] = []

    def CreateJobs(self, request: pb.CreateJobsRequest, timeout: float,
                   metadata: Sequence[tuple[str, str]]) -> pb.CreateJobsResponse:
        if self.unavailable:
            self.unavailable -= 1
            raise Unavailable()
        self.sent.append([i.request_id for i in request.items])
        results = []
        for index, item in enumerate(request.items):
            if item.spec.name.startswith("bad"):
                results.append(pb.CreateJobsResult(request_id=item.request_id, error=pb.ItemError(
                    code="INVALID_ARGUMENT", message="no", field=f"items[{index}].spec.cron")))
            else:
                results.append(pb.CreateJobsResult(request_id=item.request_id, job=pb.CreatedJob(
                    job_id="j", version=1, already_existed=item.request_id in self.existing)))
                self.existing.add(item.request_id)
        return pb.CreateJobsResponse(results=results)


def file_lines() -> list[str]:
    good = [json.dumps({**LINE, "name": f"job-{n}"}) for n in range(10)]
    return [*good[:3], "{oops", json.dumps({**LINE, "name": "bad-1"}), good[0], "",
            *good[3:]]


def run(stub: Stub, retries: Retries | None = None, **options: Any
        ) -> tuple[imp.ImportSummary, str]:
    out = io.StringIO()
    client = CronlogClient(stub=stub, retries=retries or Retries())  # type: ignore[arg-type]
    summary = imp.import_jobs(client, file_lines(), batch_items=4,
                              progress=imp.Progress(13, out), **options)
    return summary, out.getvalue()


def test_the_summary_counts_each_line_once_with_failures_by_line_number() -> None:
    stub = Stub()
    summary, progress = run(stub)
    assert (summary.created, summary.already_existed, summary.duplicates) == (10, 0, 1)
    shown = summary.as_dict()
    assert [(f["line"], f["code"], f["field"]) for f in shown["failures"]] == [
        (4, "INVALID_ARGUMENT", "line"), (5, "INVALID_ARGUMENT", "spec.cron")]
    assert sum(len(s) for s in stub.sent) == 11 and max(len(s) for s in stub.sent) <= 4
    assert "13/13 lines" in progress.splitlines()[-1]

    again, _ = run(stub)
    assert (again.created, again.already_existed) == (0, 10)


def test_a_batch_the_api_could_not_take_is_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    summary, _ = run(Stub(unavailable=1), in_flight=1)
    assert summary.created == 10 and len(summary.failures) == 2

    # Neither the importer nor its client (which makes a call the api did not take again,
    # docs/client.md) tries twice: the batch's lines fail.
    monkeypatch.setattr(imp, "BATCH_ATTEMPTS", 1)
    failed, _ = run(Stub(unavailable=1), Retries(attempts=1), in_flight=1)
    unavailable = [f for f in failed.failures if f.code == "UNAVAILABLE"]
    assert [f.number for f in unavailable] == [1, 2, 3, 5]
    assert unavailable[0].message == "api restarting"


def test_the_bar_redraws_in_place_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    bar = imp.Progress(4, out)
    bar.advance(4)
    bar.finish()
    assert out.getvalue().startswith("\r[") and "4/4 lines" in out.getvalue()
    assert out.getvalue().endswith("\n")
