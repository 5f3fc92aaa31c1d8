"""CRONLOG_LOG_FORMAT=json: one JSON object a line, the run's fields when passed, and
nothing else of the record."""

from __future__ import annotations

import json
import logging

import pytest

from cronlog.infra.observability.json_logs import (
    JsonLogFormatter,
    LogFormatError,
    instance_name,
    log_format,
)


def record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("cronlog.worker.runtime", logging.WARNING, __file__, 1, msg, args,
                            None)
    rec.__dict__.update(extra)
    return rec


def test_a_line_is_one_json_object_with_the_role_instance_and_run() -> None:
    formatter = JsonLogFormatter("worker", "host-1")
    line = formatter.format(record("attempt %d of run %s\nstopped", 2, "r-1", tenant="acme",
                                   job_id="j-1", run_id="r-1", attempt=2))
    assert "\n" not in line
    doc = json.loads(line)
    assert doc.pop("timestamp").endswith("+00:00")
    assert doc == {"level": "WARNING", "logger": "cronlog.worker.runtime",
                   "message": "attempt 2 of run r-1\nstopped", "role": "worker",
                   "instance": "host-1", "tenant": "acme", "job_id": "j-1", "run_id": "r-1",
                   "attempt": 2}


def test_other_record_attributes_never_reach_the_line() -> None:
    line = JsonLogFormatter("api", "i").format(
        record("connected", password="hunter2", token="s3cret", settings={"k": "v"}))
    assert "hunter2" not in line and "s3cret" not in line and "settings" not in line


def test_exceptions_are_kept_in_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    doc = json.loads(JsonLogFormatter("scheduler", "s").format(rec))
    assert doc["message"] == "failed" and "ValueError: boom" in doc["exception"]


def test_text_is_the_default_and_anything_else_is_refused() -> None:
    assert log_format({}) == "text"
    assert log_format({"CRONLOG_LOG_FORMAT": "JSON"}) == "json"
    with pytest.raises(LogFormatError, match="CRONLOG_LOG_FORMAT"):
        log_format({"CRONLOG_LOG_FORMAT": "xml"})


def test_the_instance_is_the_configured_id_or_host_and_pid() -> None:
    assert instance_name({"CRONLOG_INSTANCE_ID": "s-1"}) == "s-1"
    assert instance_name({"CRONLOG_WORKER_ID": "w-1"}) == "w-1"
    assert instance_name({}).rsplit("-", 1)[1].isdigit()
