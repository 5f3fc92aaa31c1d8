"""The CLI's answers for people (`-o table`) and its one-line account of an api error."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.cli.output import as_table, render
from cronlog.cli.tables import MOST_CELL_CHARS
from cronlog.v1 import job_service_pb2 as pb

JOB_ID = "0b9c4f1e-3a52-5d0e-9a8e-2f4a7c1d6b30"
RUN_ID = "7d1e0c2a-9f4b-5e63-8c1d-4b2a9e7f0c15"


def _at(text: str) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime.fromisoformat(text))
    return stamp


def _job(**spec: object) -> pb.Job:
    fields: dict[str, object] = {"name": "nightly", "tenant": "acme", "handler": "echo",
                                 "time_zone": "Europe/Berlin", **spec}
    job = pb.Job(job_id=JOB_ID, status=pb.JOB_STATUS_PAUSED, version=3,
                 spec=pb.JobSpec(**fields))  # type: ignore[arg-type]
    job.next_fire_at.CopyFrom(_at("2026-03-01T23:00:00+00:00"))
    return job


def _run() -> pb.Run:
    run = pb.Run(run_id=RUN_ID, job_id=JOB_ID, tenant="acme", status=pb.RUN_STATUS_FAILED,
                 trigger="schedule", reason="")
    run.scheduled_at.CopyFrom(_at("2026-03-01T23:00:00+00:00"))
    run.start_lag.FromTimedelta(timedelta(milliseconds=1250))
    attempt = run.attempts.add(number=1, status=pb.ATTEMPT_STATUS_FAILED, worker="w-1",
                               error="ValueError: bad input")
    attempt.started_at.CopyFrom(_at("2026-03-01T23:00:01.25+00:00"))
    attempt.progress = b'{"done":3}'
    attempt.progress_at.CopyFrom(_at("2026-03-01T23:00:02+00:00"))
    run.attempts.add(number=2, status=pb.ATTEMPT_STATUS_WAITING)
    return run


def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_a_job_list_is_one_aligned_row_per_job_with_the_columns_people_read() -> None:
    answer = pb.ListJobsResponse(jobs=[_job(cron="0 0 * * *"), _job(at=_at(
        "2026-12-24T17:00:00+00:00"))], next_page_token="tok")
    shown = as_table(answer)
    header, *rows = shown.split("\n\n")[0].splitlines()
    assert header.split("  ")[0] == "JOB ID"
    for column in ("NAME", "TENANT", "STATUS", "SCHEDULE", "TIME ZONE", "NEXT FIRE", "VERSION"):
        assert column in header
    assert len(rows) == 2
    assert rows[0].startswith(JOB_ID) and "nightly" in rows[0] and "acme" in rows[0]
    assert "paused" in rows[0] and "0 0 * * *" in rows[0] and "Europe/Berlin" in rows[0]
    assert "2026-03-01 23:00:00Z" in rows[0]
    assert "at 2026-12-24 17:00:00Z" in rows[1]
    # Aligned: every column starts at the same offset on every line.
    offsets = {line.index("acme") for line in rows}
    assert offsets == {header.index("TENANT")}
    assert shown.endswith("next page: --page-token tok")


def test_one_job_is_shown_with_the_same_columns() -> None:
    shown = as_table(pb.GetJobResponse(job=_job(cron="*/5 * * * *")))
    header, row = shown.splitlines()
    assert header.startswith("JOB ID") and row.startswith(JOB_ID)
    assert "next page" not in shown


def test_a_run_is_shown_with_its_attempts() -> None:
    shown = as_table(pb.GetRunResponse(run=_run()))
    run_part, attempts_part = shown.split("\n\n")
    header, row = run_part.splitlines()
    assert header.split()[:2] == ["RUN", "ID"]
    assert row.split()[:5] == [RUN_ID, JOB_ID, "acme", "failed", "schedule"]
    assert "1.250s" in row and row.split()[-2:] == ["2", "-"]  # two attempts, no reason
    attempts = _lines(attempts_part)
    assert attempts[0][:3] == ["#", "STATUS", "WORKER"]
    assert attempts[1][:3] == ["1", "failed", "w-1"] and "ValueError:" in attempts[1]
    assert attempts[2][:3] == ["2", "waiting", "-"]
    assert '{"done":3}' in attempts[1] and "23:00:02Z" in attempts[1], "its last progress"
    assert attempts[0][-3:] == ["PROGRESS", "AT", "ERROR"]


def test_a_run_list_and_backfilled_run_ids_are_tables() -> None:
    listed = _lines(as_table(pb.ListRunsResponse(runs=[_run(), _run()])))
    assert len(listed) == 3 and listed[1][0] == RUN_ID
    assert _lines(as_table(pb.BackfillJobResponse(run_ids=[RUN_ID]))) == [["RUN", "ID"],
                                                                          [RUN_ID]]


def test_a_preview_shows_utc_and_the_local_time_of_the_time_zone_asked_for() -> None:
    answer = pb.PreviewScheduleResponse(fire_times=[_at("2026-01-01T03:30:00+00:00")])
    lines = as_table(answer, "Asia/Kolkata").splitlines()
    assert lines[0].split("  ")[0] == "FIRE TIME (UTC)" and "LOCAL (Asia/Kolkata)" in lines[0]
    assert lines[1].startswith("2026-01-01 03:30:00Z") and "2026-01-01 09:00:00 IST" in lines[1]
    assert as_table(answer, "UTC").splitlines() == ["FIRE TIME (UTC)", "2026-01-01 03:30:00Z"]


def test_every_answer_of_the_service_has_a_table() -> None:
    """A new RPC's answer falls back to JSON: this names it so it gets columns too."""
    for method in pb.DESCRIPTOR.services_by_name["JobService"].methods:
        answer_class = getattr(pb, method.output_type.name)
        shown = as_table(answer_class())
        assert not shown.startswith("{"), f"{method.name} has no table"


def test_json_is_the_default_and_unchanged() -> None:
    job = pb.GetJobResponse(job=_job(cron="0 0 * * *", payload=b"v2"))
    parsed = json.loads(render(job, "json"))
    assert parsed["job"]["spec"]["payload"] == "djI=" and parsed["job"]["version"] == "3"
    assert parsed["job"]["status"] == "JOB_STATUS_PAUSED"


@pytest.mark.parametrize("hostile", ["\x1b]0;owned\x07\x1b[2J", "two\nlines", "tab\there",
                                     "\u202eevil", "zero\u200bwidth"])
def test_cells_hold_no_control_characters(hostile: str) -> None:
    """A job name or a handler's error is the tenant's text: in a table it must neither
    break the columns nor reach the terminal as an escape sequence."""
    run = _run()
    run.attempts[0].error = hostile
    job_shown = as_table(pb.GetJobResponse(job=_job(cron="* * * * *", name=hostile)))
    run_shown = as_table(pb.GetRunResponse(run=run))
    assert all(ch.isprintable() or ch == "\n" for ch in job_shown + run_shown)
    assert len(job_shown.splitlines()) == 2
    assert len(run_shown.split("\n\n")[1].splitlines()) == 3  # header and two attempts


def test_a_long_value_is_cut_to_keep_the_columns_on_screen() -> None:
    shown = as_table(pb.GetJobResponse(job=_job(cron="* * * * *", name="n" * 500)))
    assert "n" * MOST_CELL_CHARS not in shown and "n" * (MOST_CELL_CHARS - 1) + "…" in shown


def _unset() -> Message:
    return pb.GetJobResponse(job=pb.Job(job_id=JOB_ID))


def test_absent_values_show_as_a_dash() -> None:
    row = _lines(as_table(_unset()))[1]
    assert row[0] == JOB_ID and row.count("-") >= 3  # name, tenant, schedule, next fire


def test_timestamps_are_utc_whatever_zone_they_were_made_in() -> None:
    stamp = _at(datetime(2026, 6, 1, 12, 0, tzinfo=UTC).astimezone().isoformat())
    job = _job(cron="* * * * *")
    job.next_fire_at.CopyFrom(stamp)
    assert "2026-06-01 12:00:00Z" in as_table(pb.GetJobResponse(job=job))
