"""The CLI's `--after`, `--on`, `--wait-window` and `--cascade`, and how a dependent job and
a dependency run are shown."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.cli.job_spec import UsageError, duration, job_spec, update_request
from cronlog.cli.output import as_table, render
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb

JOB_ID = "0b9c4f1e-3a52-5d0e-9a8e-2f4a7c1d6b30"
UP1 = "11111111-1111-4111-8111-111111111111"
UP2 = "22222222-2222-4222-8222-222222222222"
UP3 = "33333333-3333-4333-8333-333333333333"
RUN_ID = "7d1e0c2a-9f4b-5e63-8c1d-4b2a9e7f0c15"


def _create(*options: str) -> pb.JobSpec:
    args = _parser().parse_args(["jobs", "create", "--name", "n", "--tenant", "t",
                                 "--handler", "echo", *options])
    return job_spec(args)


def test_after_takes_ids_separated_by_commas_or_repeated() -> None:
    spec = _create("--after", f"{UP1},{UP2}", "--after", UP3, "--on", "failure",
                   "--wait-window", "3h")
    assert spec.WhichOneof("schedule") == "after"
    assert list(spec.after.job_ids) == [UP1, UP2, UP3]
    assert spec.after.condition == pb.DEPENDENCY_CONDITION_FAILURE
    assert spec.after.wait_window.ToTimedelta() == timedelta(hours=3)


def test_after_alone_leaves_condition_and_window_to_the_api() -> None:
    spec = _create("--after", UP1)
    assert spec.after.condition == pb.DEPENDENCY_CONDITION_UNSPECIFIED
    assert not spec.after.HasField("wait_window")


@pytest.mark.parametrize("schedule", [["--cron", "* * * * *"], ["--at", "2030-01-01T00:00:00Z"]])
def test_after_excludes_the_other_schedules(schedule: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _create("--after", UP1, *schedule)
    assert exited.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("options", [["--on", "any"], ["--wait-window", "1h"],
                                     ["--cron", "* * * * *", "--on", "any"]])
def test_on_and_wait_window_need_after(options: list[str]) -> None:
    with pytest.raises(UsageError, match="--on and --wait-window go with --after"):
        _create(*options)


def test_an_empty_after_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--after"):
        _create("--after", ",")


@pytest.mark.parametrize("text,expected", [
    ("90", timedelta(seconds=90)), ("90s", timedelta(seconds=90)),
    ("15m", timedelta(minutes=15)), ("1h30m", timedelta(minutes=90)),
    ("1.5h", timedelta(minutes=90)), ("7d", timedelta(days=7))])
def test_durations_read_as_people_write_them(text: str, expected: timedelta) -> None:
    assert duration(text, "--wait-window") == expected


@pytest.mark.parametrize("text", ["", "h", "1x", "1h 30m", "-5", "inf", "nan", "1h30"])
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(UsageError, match="--wait-window"):
        duration(text, "--wait-window")


def _cron_job() -> pb.Job:
    job = pb.Job(job_id=JOB_ID, version=4, spec=pb.JobSpec(
        name="n", tenant="t", handler="echo", cron="0 2 * * *", time_zone="Europe/Berlin"))
    job.spec.start_at.FromSeconds(1_900_000_000)
    return job


def test_an_update_to_after_drops_the_schedules_zone_and_bounds() -> None:
    args = _parser().parse_args(["jobs", "update", JOB_ID, "--after", UP1])
    request = update_request(args, _cron_job())
    assert request.expected_version == 4
    assert request.spec.WhichOneof("schedule") == "after"
    assert request.spec.time_zone == "UTC" and not request.spec.HasField("start_at")


def test_an_update_of_a_dependent_changes_only_what_it_names() -> None:
    current = pb.Job(job_id=JOB_ID, version=2, spec=pb.JobSpec(
        name="n", tenant="t", handler="echo", after=pb.Dependency(job_ids=[UP1, UP2])))
    args = _parser().parse_args(["jobs", "update", JOB_ID, "--on", "any"])
    after = update_request(args, current).spec.after
    assert list(after.job_ids) == [UP1, UP2] and after.condition == pb.DEPENDENCY_CONDITION_ANY
    back = update_request(_parser().parse_args(["jobs", "update", JOB_ID, "--cron", "0 * * * *"]),
                          current).spec
    assert back.WhichOneof("schedule") == "cron", "a cron schedule replaces after"


@pytest.mark.parametrize("action", [["trigger", JOB_ID],
                                    ["backfill", JOB_ID, "--from", "x", "--until", "y"]])
def test_trigger_and_backfill_cascade_only_when_asked(action: list[str]) -> None:
    assert _parser().parse_args(["jobs", *action, "--cascade"]).cascade is True
    assert _parser().parse_args(["jobs", *action]).cascade is False


def _dependent() -> pb.Job:
    return pb.Job(job_id=JOB_ID, version=1, status=pb.JOB_STATUS_ACTIVE, spec=pb.JobSpec(
        name="report", tenant="t", handler="echo", time_zone="UTC", after=pb.Dependency(
            job_ids=[UP1, UP2], condition=pb.DEPENDENCY_CONDITION_FAILURE,
            wait_window=Duration(seconds=5400))))


def test_a_dependent_job_shows_what_it_runs_after() -> None:
    job_part, after_part = as_table(pb.GetJobResponse(job=_dependent())).split("\n\n")
    assert "after 2 jobs on failure" in job_part.splitlines()[1]
    header, *rows = after_part.splitlines()
    assert header.split()[:4] == ["RUNS", "AFTER", "JOB", "ON"]
    assert [r.split() for r in rows] == [[UP1, "failure", "5400.000s"],
                                         [UP2, "failure", "5400.000s"]]
    listed = as_table(pb.ListJobsResponse(jobs=[_dependent()]))
    assert "after 2 jobs on failure" in listed and UP1 not in listed


def _dependency_run() -> pb.Run:
    run = pb.Run(run_id=RUN_ID, job_id=JOB_ID, tenant="t", status=pb.RUN_STATUS_SUCCEEDED,
                 trigger="dependency", upstream_run_ids=[UP1, UP2], depth=2)
    run.scheduled_at.FromSeconds(1_900_000_600)
    run.logical_time.FromSeconds(1_900_000_000)
    return run


def test_a_dependency_run_shows_its_logical_time_and_upstream_runs() -> None:
    run_part, chain_part = as_table(pb.GetRunResponse(run=_dependency_run())).split("\n\n")
    header, row = run_part.splitlines()
    assert "LOGICAL TIME" in header
    assert row[header.index("LOGICAL TIME"):].startswith("2030-03-17 17:46:40Z")
    assert [line.split() for line in chain_part.splitlines()] == [
        ["DEPTH", "CASCADE", "UPSTREAM", "RUN"], ["2", "scheduled", UP1],
        ["2", "scheduled", UP2]]
    cascading = _dependency_run()
    cascading.cascade = "backfill-7"
    assert "backfill-7" in as_table(pb.GetRunResponse(run=cascading))


def test_json_has_every_chain_field() -> None:
    parsed = json.loads(render(pb.GetRunResponse(run=_dependency_run()), "json"))["run"]
    assert parsed["upstream_run_ids"] == [UP1, UP2] and parsed["depth"] == 2
    assert parsed["logical_time"] == "2030-03-17T17:46:40Z"
    spec = json.loads(render(pb.GetJobResponse(job=_dependent()), "json"))["job"]["spec"]
    assert spec["after"] == {"job_ids": [UP1, UP2], "condition": "DEPENDENCY_CONDITION_FAILURE",
                             "wait_window": "5400s"}
