"""Issue 17 item 3: the scheduler's and the worker's lines about one job, run or attempt carry
tenant, job_id, run_id and attempt as fields of their JSON line (CRONLOG_LOG_FORMAT=json)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from cronlog.commands.owner.ports import Topics
from cronlog.commands.owner.set_aside import JobFailed, job_set_aside_alert, poison_records
from cronlog.infra.observability.json_logs import JsonLogFormatter
from cronlog.log_fields import MAX_FIELD_CHARS, log_fields, record_fields
from cronlog.ports import InboundMessage
from cronlog.worker.handler_context import HandlerContext, HandlerFailed
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.runtime import WorkerRuntime
from tests.support.clock import FakeClock
from tests.support.polling import wait_for
from tests.support.worker_transport import T0, Sink, Source, dispatch

AT = datetime(2026, 1, 1, tzinfo=UTC)
TOPICS = Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}")


def json_lines(caplog: pytest.LogCaptureFixture, role: str) -> list[dict[str, Any]]:
    formatter = JsonLogFormatter(role, "i-1")
    return [json.loads(formatter.format(r)) for r in caplog.records]


def test_fields_are_text_of_bounded_length_and_unknown_ones_are_left_out() -> None:
    job, run = uuid4(), uuid4()
    assert log_fields("acme", job, run, 2) == {"tenant": "acme", "job_id": str(job),
                                               "run_id": str(run), "attempt": 2}
    assert log_fields(job_id=job) == {"job_id": str(job)}
    assert record_fields({"run_id": "r" * 5000, "attempt": "x", "token": "s3cret"}) == {
        "run_id": "r" * MAX_FIELD_CHARS, "attempt": "x"}
    assert record_fields(None) == {}  # type: ignore[arg-type]


def test_a_set_aside_message_and_job_name_their_tenant_and_job(
        caplog: pytest.LogCaptureFixture) -> None:
    job = uuid4()
    message = InboundMessage("inbox", 3, 41, "CancelRun",
                             {"job_id": str(job), "run_id": "garbled"}, b"\x00")
    with caplog.at_level(logging.ERROR, logger="cronlog.commands.owner.set_aside"):
        poison_records(TOPICS, message, "ValueError: no such field", "acme", AT)
        job_set_aside_alert(TOPICS, JobFailed(job, "acme", KeyError("spec")), AT)
    poisoned, set_aside = json_lines(caplog, "scheduler")
    assert poisoned["message"].startswith("set aside CancelRun at inbox[3]@41")
    assert (poisoned["tenant"], poisoned["job_id"]) == ("acme", str(job))
    assert set_aside["message"].startswith(f"job {job} set aside")
    assert (set_aside["tenant"], set_aside["job_id"], set_aside["role"]) == (
        "acme", str(job), "scheduler")


def test_a_failed_attempt_names_its_tenant_job_run_and_attempt(
        caplog: pytest.LogCaptureFixture) -> None:
    def boom(_ctx: HandlerContext) -> bytes:
        raise HandlerFailed("cannot log in with password=hunter2", "LoginFailed")

    registry = HandlerRegistry()
    registry.register("boom", boom)
    clock, source, sink = FakeClock(T0), Source(), Sink()
    worker = WorkerRuntime("w1", source, sink, registry, clock, slots=1)
    failing = dispatch(0, AT.replace(year=2025), handler="boom")
    failing.record["attempt"] = 3  # type: ignore[index]
    source.messages = [failing]
    with caplog.at_level(logging.INFO, logger="cronlog.worker.runtime"):
        worker.step()
        wait_for(lambda: any("failed" in r.getMessage() for r in caplog.records), 5,
                 "the failed attempt's line")
    line = next(doc for doc in json_lines(caplog, "worker") if "failed" in doc["message"])
    record = failing.record
    assert line["message"] == f"attempt 3 of run {record['run_id']} failed"
    assert {k: line[k] for k in ("tenant", "job_id", "run_id", "attempt")} == {
        "tenant": "t", "job_id": str(record["job_id"]), "run_id": str(record["run_id"]),
        "attempt": 3}
    assert "hunter2" in sink.sent[-1][1]["error"], "the error is in the report"
    assert "hunter2" not in json.dumps(line), "but not in the operators' log"
