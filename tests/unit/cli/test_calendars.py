"""The CLI's calendars commands and excluded-days options: what they send, what they refuse
before sending, and how the answers look."""

from __future__ import annotations

import pytest

from cronlog.cli.calendars import (
    CalendarUsageError,
    exclusion_texts,
    update_calendar_request,
)
from cronlog.cli.commands import run_client
from cronlog.cli.job_spec import job_spec, update_request
from cronlog.cli.output import as_table
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb

JOB_ID = "0b9c4f1e-3a52-5d0e-9a8e-2f4a7c1d6b30"


def test_a_job_is_created_with_a_calendar_and_its_own_days() -> None:
    args = _parser().parse_args(["jobs", "create", "--name", "n", "--handler", "h", "--cron",
                                 "0 9 * * *", "--calendar", "uk", "--exclude", "2026-12-24",
                                 "--exclude", "2026-12-31..2027-01-01"])
    spec = job_spec(args)
    assert (spec.calendar, list(spec.exclusions)) == ("uk", ["2026-12-24",
                                                             "2026-12-31..2027-01-01"])


def current_job() -> pb.Job:
    return pb.Job(job_id=JOB_ID, version=4, spec=pb.JobSpec(
        name="n", tenant="acme", handler="h", cron="0 9 * * *", calendar="uk",
        exclusions=["2026-12-24"]))


@pytest.mark.parametrize(("options", "calendar", "exclusions"), [
    ([], "uk", ["2026-12-24"]),  # options not given keep their value
    (["--exclude", "2027-01-01"], "uk", ["2027-01-01"]),  # --exclude replaces the list
    (["--no-exclusions"], "uk", []),
    (["--calendar", ""], "", ["2026-12-24"]),
    (["--calendar", "us"], "us", ["2026-12-24"]),
])
def test_an_update_changes_only_what_it_is_told(options: list[str], calendar: str,
                                               exclusions: list[str]) -> None:
    args = _parser().parse_args(["jobs", "update", JOB_ID, *options])
    request = update_request(args, current_job())
    assert (request.spec.calendar, list(request.spec.exclusions)) == (calendar, exclusions)
    assert request.expected_version == 4


def test_a_job_switched_to_after_drops_its_excluded_days() -> None:
    args = _parser().parse_args(["jobs", "update", JOB_ID, "--after", JOB_ID])
    spec = update_request(args, current_job()).spec
    assert (spec.calendar, list(spec.exclusions)) == ("", [])


@pytest.mark.parametrize("argv", [
    ["jobs", "create", "--name", "n", "--cron", "* * * * *", "--exclude", "2026-02-30"],
    ["calendars", "create", "uk", "--exclude", "christmas"],
    ["calendars", "update", "uk"],
    ["preview", "0 9 * * *", "--exclude", "2027-01-02..2027-01-01"],
])
def test_bad_options_are_a_usage_error_before_anything_is_sent(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # A closed port: any attempt to send would be an api error (exit 1), not a usage one.
    assert run_client(_parser().parse_args(["--address", "127.0.0.1:1", *argv])) == 2
    assert "error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["jobs", "update", JOB_ID, "--exclude", "2026-12-24", "--no-exclusions"],
    ["calendars", "update", "uk", "--exclude", "2026-12-24", "--no-exclusions"],
])
def test_exclude_and_no_exclusions_do_not_go_together(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        _parser().parse_args(argv)
    assert raised.value.code == 2


def test_exclusion_texts_are_checked_and_kept_as_given() -> None:
    assert exclusion_texts([" 2026-12-25 ", "2026-12-24"]) == ["2026-12-25", "2026-12-24"]
    with pytest.raises(CalendarUsageError, match="--exclude"):
        exclusion_texts(["2026-13-01"])
    assert exclusion_texts(None) == []


def test_a_calendar_update_replaces_what_is_given_at_the_version_read() -> None:
    current = pb.Calendar(name="uk", description="bank holidays", exclusions=["2026-12-25"],
                          version=3)
    keep = _parser().parse_args(["calendars", "update", "uk", "--description", "new"])
    request = update_calendar_request(keep, current)
    assert (request.description, list(request.exclusions), request.expected_version) == (
        "new", ["2026-12-25"], 3)
    replace = _parser().parse_args(["calendars", "update", "uk", "--exclude", "2027-01-01",
                                    "--expected-version", "0", "--tenant", "acme"])
    request = update_calendar_request(replace, current)
    assert (request.description, list(request.exclusions), request.expected_version,
            request.tenant) == ("bank holidays", ["2027-01-01"], 0, "acme")
    empty = _parser().parse_args(["calendars", "update", "uk", "--no-exclusions"])
    assert list(update_calendar_request(empty, current).exclusions) == []


def test_preview_takes_a_calendar_and_days() -> None:
    args = _parser().parse_args(["preview", "0 9 * * *", "--calendar", "uk", "--exclude",
                                 "2026-12-24", "--tenant", "acme"])
    assert (args.calendar, args.exclude, args.tenant) == ("uk", ["2026-12-24"], "acme")


def test_calendars_show_as_tables() -> None:
    calendar = pb.Calendar(name="uk", tenant="acme", version=2, jobs=3,
                           exclusions=["2026-12-25..2026-12-26", "2027-01-01"],
                           description="bank holidays")
    listed = as_table(pb.ListCalendarsResponse(calendars=[calendar], next_page_token="t"))
    header, row = listed.splitlines()[:2]
    assert header.split() == ["NAME", "TENANT", "VERSION", "JOBS", "EXCLUDED", "UPDATED",
                              "DESCRIPTION"]
    assert row.split()[:5] == ["uk", "acme", "2", "3", "2"]
    assert listed.endswith("next page: --page-token t")
    one = as_table(pb.GetCalendarResponse(calendar=calendar))
    assert "2026-12-25..2026-12-26" in one and "2027-01-01" in one


def test_a_job_shows_the_calendar_it_follows() -> None:
    job = current_job()
    job.calendar.CopyFrom(pb.AppliedCalendar(name="uk", version=2, found=False))
    shown = as_table(pb.GetJobResponse(job=job))
    last = shown.splitlines()[-1]
    assert last.split()[:3] == ["uk", "2", "no"] and "2026-12-24" in last
    plain = pb.GetJobResponse(job=pb.Job(spec=pb.JobSpec(cron="* * * * *")))
    assert "CALENDAR" not in as_table(plain)
