"""Calendars end to end (issue 20, docs/calendars.md), with per-tenant tokens: an excluded day
is not a fire time (GetJob's next fire time and PreviewSchedule skip it; a calendar updated to
exclude today stops a firing job, which creates no run for today); another tenant can neither
see nor use a calendar; bad input is refused naming the field and writes nothing; the CLI does
the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, time, timedelta
from typing import Any, cast

import grpc
import pytest

from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

ALPHA, BETA = "alpha", "beta"
ALPHA_TOKEN = "alpha-" + uuid.uuid4().hex
BETA_TOKEN = "beta-" + uuid.uuid4().hex
A = (("authorization", f"Bearer {ALPHA_TOKEN}"),)
B = (("authorization", f"Bearer {BETA_TOKEN}"),)
# A daily fire time half a day from now, so no day boundary moves while the module runs.
HOUR = (datetime.now(UTC).hour + 12) % 24
DAILY = f"0 {HOUR} * * *"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def rejection(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


def field_of(error: grpc.RpcError) -> str | None:
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ())
    return dict(trailing).get("cronlog-field")


def code(error: grpc.RpcError) -> grpc.StatusCode:
    return error.code()


SERVICE_ENV = {"CRONLOG_TENANT_TOKENS": f"{ALPHA}={ALPHA_TOKEN},{BETA}={BETA_TOKEN}"}


def day_text(day: datetime) -> str:
    return day.date().isoformat()


def natural_dailies(count: int) -> list[datetime]:
    """The next fire times (UTC) of DAILY after now, without exclusions."""
    now = datetime.now(UTC)
    first = datetime.combine(now.date(), time(HOUR), UTC)
    if first <= now:
        first += timedelta(days=1)
    return [first + timedelta(days=i) for i in range(count)]


def create_calendar(stub: pb_grpc.JobServiceStub, name: str, *days: str,
                    metadata: Any = A) -> pb.Calendar:
    return stub.CreateCalendar(pb.CreateCalendarRequest(
        request_id=rid(), name=name, description="days off", exclusions=list(days)),
        timeout=30, metadata=metadata).calendar


def create_job(stub: pb_grpc.JobServiceStub, cron: str, metadata: Any = A,
               **spec: Any) -> pb.Job:
    return stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(
        name=unique("job"), handler="echo", cron=cron, **spec)), timeout=30,
        metadata=metadata).job


def get_job(stub: pb_grpc.JobServiceStub, job_id: str, metadata: Any = A) -> pb.Job:
    return stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10, metadata=metadata).job


def fire_times(stub: pb_grpc.JobServiceStub, count: int, metadata: Any = A,
               **request: Any) -> list[datetime]:
    answer = stub.PreviewSchedule(pb.PreviewScheduleRequest(cron=DAILY, count=count, **request),
                                  timeout=10, metadata=metadata)
    return [t.ToDatetime(tzinfo=UTC) for t in answer.fire_times]


def test_an_excluded_day_is_not_a_fire_time_and_calendar_updates_reach_the_job(
        stub: pb_grpc.JobServiceStub) -> None:
    dailies = natural_dailies(4)
    name = unique("holidays")
    calendar = create_calendar(stub, name, day_text(dailies[0]))
    assert (calendar.name, calendar.tenant, calendar.version, list(calendar.exclusions)) == (
        name, ALPHA, 1, [day_text(dailies[0])])

    # The schedule alone fires on the first noon; with the calendar it does not.
    assert fire_times(stub, 2) == dailies[:2]
    assert fire_times(stub, 2, calendar=name) == dailies[1:3]
    preview = stub.PreviewSchedule(pb.PreviewScheduleRequest(
        cron=DAILY, count=1, calendar=name, exclusions=[day_text(dailies[1])]), timeout=10,
        metadata=A)
    assert [t.ToDatetime(tzinfo=UTC) for t in preview.fire_times] == [dailies[2]]
    assert f"calendar {name}" in preview.description

    job = create_job(stub, DAILY, calendar=name)
    assert job.next_fire_at.ToDatetime(tzinfo=UTC) == dailies[1]
    assert job.spec.calendar == name
    assert (job.calendar.name, job.calendar.version, job.calendar.found,
            list(job.calendar.exclusions)) == (name, 1, True, [day_text(dailies[0])])
    # A job's own excluded days, without a calendar.
    own = create_job(stub, DAILY, exclusions=[day_text(dailies[0])])
    assert own.next_fire_at.ToDatetime(tzinfo=UTC) == dailies[1]
    assert list(own.spec.exclusions) == [day_text(dailies[0])]

    updated = stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=name, description="more days off", expected_version=1,
        exclusions=[day_text(dailies[0]), day_text(dailies[1])]), timeout=30, metadata=A).calendar
    assert (updated.version, list(updated.exclusions)) == (
        2, [f"{day_text(dailies[0])}..{day_text(dailies[1])}"])

    def moved() -> pb.Job | None:
        now = get_job(stub, job.job_id)
        return now if now.calendar.version == 2 else None

    followed = wait_for(moved, 30, "the job applying the calendar's version 2")
    assert followed.next_fire_at.ToDatetime(tzinfo=UTC) == dailies[2]
    got = stub.GetCalendar(pb.GetCalendarRequest(name=name), timeout=10, metadata=A).calendar
    assert (got.version, got.description, got.jobs) == (2, "more days off", 1)

    # A job that leaves the calendar fires on its own schedule again.
    left = stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job.job_id, expected_version=followed.version,
        spec=pb.JobSpec(name=followed.spec.name, handler="echo", cron=DAILY)), timeout=30,
        metadata=A).job
    assert left.next_fire_at.ToDatetime(tzinfo=UTC) == dailies[0]
    assert not left.HasField("calendar")


def runs_scheduled_after(stub: pb_grpc.JobServiceStub, job_id: str,
                         after: datetime) -> list[pb.Run]:
    request = pb.ListRunsRequest(job_id=job_id, page_size=100)
    request.scheduled_after.FromDatetime(after)
    return list(stub.ListRuns(request, timeout=10, metadata=A).runs)


def test_a_calendar_updated_to_exclude_today_stops_a_firing_job(
        stub: pb_grpc.JobServiceStub) -> None:
    name = unique("quiet")
    create_calendar(stub, name)
    every_second = "* * * * * *"
    job = create_job(stub, every_second, calendar=name)
    # A job beside it without the calendar shows the scheduler firing all along.
    control = create_job(stub, every_second)
    started = datetime.now(UTC)
    wait_for(lambda: runs_scheduled_after(stub, job.job_id, started), 30,
             "the calendar's job firing before its calendar excludes today")

    today = datetime.now(UTC)
    # Today and tomorrow: the test may cross midnight.
    stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=name, exclusions=[
            f"{day_text(today)}..{day_text(today + timedelta(days=1))}"]),
        timeout=30, metadata=A)
    after_tomorrow = datetime.combine(today.date() + timedelta(days=2), time(0), UTC)

    def applied() -> pb.Job | None:
        now = get_job(stub, job.job_id)
        return now if now.calendar.version == 2 else None

    followed = wait_for(applied, 30, "the job applying the calendar that excludes today")
    applied_at = datetime.now(UTC)
    assert followed.next_fire_at.ToDatetime(tzinfo=UTC) == after_tomorrow
    # Runs the owner had already created within its lookahead (8 s by default) still come.
    quiet_from = applied_at + Settings().lookahead + timedelta(seconds=1)
    wait_for(lambda: len(runs_scheduled_after(stub, control.job_id,
                                              quiet_from + timedelta(seconds=3))) >= 2,
             60, "the control job firing for a few seconds past the quiet start")
    assert runs_scheduled_after(stub, job.job_id, quiet_from) == []
    last = get_job(stub, job.job_id)
    assert last.last_fired_at.ToDatetime(tzinfo=UTC) < quiet_from
    assert last.next_fire_at.ToDatetime(tzinfo=UTC) == after_tomorrow
    for doomed in (job, control):
        stub.DeleteJob(pb.DeleteJobRequest(request_id=rid(), job_id=doomed.job_id),
                       timeout=30, metadata=A)


def test_another_tenant_can_neither_see_nor_use_a_calendar(
        stub: pb_grpc.JobServiceStub) -> None:
    dailies = natural_dailies(2)
    name = unique("private")
    create_calendar(stub, name, day_text(dailies[0]))

    def alphas() -> pb.Calendar:
        return stub.GetCalendar(pb.GetCalendarRequest(name=name), timeout=10,
                                metadata=A).calendar

    missing = rejection(lambda: stub.GetCalendar(pb.GetCalendarRequest(name=name),
                                                 timeout=10, metadata=B))
    assert code(missing) == grpc.StatusCode.NOT_FOUND
    named = rejection(lambda: stub.GetCalendar(pb.GetCalendarRequest(tenant=ALPHA, name=name),
                                               timeout=10, metadata=B))
    assert code(named) == grpc.StatusCode.PERMISSION_DENIED
    assert name not in [c.name for c in stub.ListCalendars(
        pb.ListCalendarsRequest(), timeout=10, metadata=B).calendars]
    listed = rejection(lambda: stub.ListCalendars(pb.ListCalendarsRequest(tenant=ALPHA),
                                                  timeout=10, metadata=B))
    assert code(listed) == grpc.StatusCode.PERMISSION_DENIED
    assert name in [c.name for c in stub.ListCalendars(
        pb.ListCalendarsRequest(), timeout=10, metadata=A).calendars]

    update = rejection(lambda: stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=name, exclusions=["2030-01-01"]), timeout=30, metadata=B))
    assert code(update) == grpc.StatusCode.NOT_FOUND
    used = rejection(lambda: create_job(stub, DAILY, B, calendar=name))
    assert (code(used), field_of(used)) == (grpc.StatusCode.FAILED_PRECONDITION,
                                            "spec.calendar")
    previewed = rejection(lambda: fire_times(stub, 1, B, calendar=name))
    assert (code(previewed), field_of(previewed)) == (grpc.StatusCode.FAILED_PRECONDITION,
                                                      "calendar")
    # Beta's own calendar of the same name is another calendar.
    own = create_calendar(stub, name, "2030-01-01", metadata=B)
    assert (own.tenant, own.version, list(own.exclusions)) == (BETA, 1, ["2030-01-01"])
    job = create_job(stub, DAILY, B, calendar=name)
    assert job.next_fire_at.ToDatetime(tzinfo=UTC) == dailies[0]
    assert (job.calendar.version, list(job.calendar.exclusions)) == (1, ["2030-01-01"])
    assert (alphas().version, list(alphas().exclusions), alphas().jobs) == (
        1, [day_text(dailies[0])], 0)


def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
        stub: pb_grpc.JobServiceStub) -> None:
    name = unique("bad")
    for request, field in (
            (pb.CreateCalendarRequest(name="no spaces here"), "name"),
            (pb.CreateCalendarRequest(name=""), "name"),
            (pb.CreateCalendarRequest(name=name, description="d" * 1001), "description"),
            (pb.CreateCalendarRequest(name=name, exclusions=["2026-02-30"]), "exclusions"),
            (pb.CreateCalendarRequest(name=name, exclusions=["2027-01-02..2027-01-01"]),
             "exclusions"),
            (pb.CreateCalendarRequest(name=name, exclusions=["2100-01-01"]), "exclusions"),
            (pb.CreateCalendarRequest(name=name, exclusions=["2030-01-01"] * 1001),
             "exclusions")):
        request.request_id = rid()
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        error = rejection(lambda r=request: stub.CreateCalendar(  # type: ignore[misc]
            r, timeout=30, metadata=A))
        assert (code(error), field_of(error)) == (grpc.StatusCode.INVALID_ARGUMENT, field)
    absent = rejection(lambda: stub.GetCalendar(pb.GetCalendarRequest(name=name), timeout=10,
                                                metadata=A))
    assert code(absent) == grpc.StatusCode.NOT_FOUND, "a refused create writes nothing"

    create_calendar(stub, name)
    again = rejection(lambda: create_calendar(stub, name))
    assert code(again) == grpc.StatusCode.ALREADY_EXISTS
    stale = rejection(lambda: stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=name, exclusions=["2030-01-01"], expected_version=7),
        timeout=30, metadata=A))
    assert code(stale) == grpc.StatusCode.FAILED_PRECONDITION
    nowhere = rejection(lambda: stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=unique("nowhere")), timeout=30, metadata=A))
    assert code(nowhere) == grpc.StatusCode.NOT_FOUND
    bad_update = rejection(lambda: stub.UpdateCalendar(pb.UpdateCalendarRequest(
        request_id=rid(), name=name, exclusions=["12/25/2030"]), timeout=30, metadata=A))
    assert field_of(bad_update) == "exclusions"
    assert stub.GetCalendar(pb.GetCalendarRequest(name=name), timeout=10,
                            metadata=A).calendar.version == 1

    for spec, field in (
            ({"exclusions": ["christmas"]}, "spec.exclusions"),
            ({"calendar": "not a name"}, "spec.calendar"),
            ({"calendar": unique("missing")}, "spec.calendar")):
        # A lambda that binds by a default is beyond mypy (python/mypy#15459).
        error = rejection(lambda s=spec: create_job(stub, DAILY, **s))  # type: ignore[misc]
        assert field_of(error) == field, spec
    dependent = rejection(lambda: stub.CreateJob(pb.CreateJobRequest(
        request_id=rid(), spec=pb.JobSpec(name="dependent", handler="echo", calendar=name,
                                          after=pb.Dependency(job_ids=[str(uuid.uuid4())]))),
        timeout=30, metadata=A))
    assert (code(dependent), field_of(dependent)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                      "spec.calendar")
    preview = rejection(lambda: fire_times(stub, 1, exclusions=["2030-1-1"]))
    assert (code(preview), field_of(preview)) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                  "exclusions")


def cli(service: RunningService, *args: str, ok: bool = True) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "--address", service.address,
         *args], capture_output=True, text=True, timeout=90,
        env={**os.environ, "CRONLOG_TOKEN": ALPHA_TOKEN})
    if not ok:
        assert done.returncode != 0 and done.stdout == "", done.stdout + done.stderr
        return done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout if "table" in args else json.loads(done.stdout)


def test_the_cli_manages_calendars_and_jobs_on_them(service: RunningService,
                                                    stub: pb_grpc.JobServiceStub) -> None:
    dailies = natural_dailies(3)
    name = unique("cli")
    created = cli(service, "calendars", "create", name, "--description", "office closed",
                  "--exclude", day_text(dailies[0]))["calendar"]
    assert (created["name"], created["version"], created["exclusions"]) == (
        name, "1", [day_text(dailies[0])])
    job = cli(service, "jobs", "create", "--name", "cli-cal", "--handler", "echo", "--cron",
              DAILY, "--calendar", name, "--exclude", day_text(dailies[1]))["job"]
    assert job["next_fire_at"].startswith(day_text(dailies[2]))
    assert job["calendar"]["name"] == name and job["spec"]["exclusions"] == [
        day_text(dailies[1])]
    preview = cli(service, "preview", DAILY, "--calendar", name, "--count", "1")
    assert preview["fire_times"][0].startswith(day_text(dailies[1]))

    updated = cli(service, "calendars", "update", name, "--no-exclusions")["calendar"]
    assert updated["version"] == "2" and "exclusions" not in updated
    wait_for(lambda: get_job(stub, job["job_id"]).next_fire_at.ToDatetime(tzinfo=UTC)
             == dailies[0], 30, "the job firing on the first day again")
    table = cli(service, "-o", "table", "calendars", "list")
    assert name in table and table.splitlines()[0].split()[:2] == ["NAME", "TENANT"]
    got = cli(service, "calendars", "get", name)["calendar"]
    assert (got["jobs"], got["description"]) == (1, "office closed")
    error = cli(service, "calendars", "get", unique("none"), ok=False)
    assert "NOT_FOUND" in error
    usage = cli(service, "calendars", "create", unique("x"), "--exclude", "tomorrow", ok=False)
    assert "--exclude" in usage
