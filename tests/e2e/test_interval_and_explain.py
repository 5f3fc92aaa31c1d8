"""Issue 20 over gRPC: an interval job runs at its spacing from its start_at, and
PreviewSchedule explains fire times across a DST change (notes, offsets, words)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e

EVERY = timedelta(seconds=3)


def test_an_every_three_seconds_job_runs_three_seconds_apart_from_its_start(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    # A phase off the whole seconds of the clock: the runs follow start_at, not the epoch.
    start = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=250_000)
    spec = pb.JobSpec(name="every-3s", tenant="interval-" + uuid.uuid4().hex[:6],
                      handler="echo", time_zone="Europe/Berlin",
                      every=Duration(seconds=3))
    spec.start_at.FromDatetime(start)
    created = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                             timeout=30).job
    assert created.spec.WhichOneof("schedule") == "every"
    assert created.spec.every.ToTimedelta() == EVERY
    assert created.next_fire_at.ToDatetime(tzinfo=UTC) == start

    def four_succeeded() -> list[pb.Run] | None:
        runs = stub.ListRuns(pb.ListRunsRequest(job_id=created.job_id,
                                                status=pb.RUN_STATUS_SUCCEEDED), timeout=10).runs
        return list(runs) if len(runs) >= 4 else None

    runs = wait_for(four_succeeded, 60, "four succeeded runs of the interval job")
    scheduled = sorted(r.scheduled_at.ToDatetime(tzinfo=UTC) for r in runs)
    assert scheduled[0] == start
    assert all(b - a == EVERY for a, b in pairwise(scheduled))
    job = stub.GetJob(pb.GetJobRequest(job_id=created.job_id), timeout=10).job
    assert (job.next_fire_at.ToDatetime(tzinfo=UTC) - start) % EVERY == timedelta(0)


def test_an_interval_out_of_bounds_is_refused_naming_the_field(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="too-fast", tenant="interval-" + uuid.uuid4().hex[:6],
                      handler="echo", every=Duration(nanos=500_000_000))
    with pytest.raises(grpc.RpcError) as caught:
        stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (caught.value.details() or "").startswith("spec.schedule.every")


def test_preview_explains_fire_times_across_a_dst_change(service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    request = pb.PreviewScheduleRequest(cron="30 2 * * 1-5", time_zone="Europe/Berlin",
                                        count=3)
    # Berlin springs forward on Sunday 2027-03-28, 02:00 -> 03:00 at 01:00Z: a weekday job
    # never meets the gap, only its offset changes; a daily one fires at the gap's end.
    request.after.FromDatetime(datetime(2027, 3, 26, 12, tzinfo=UTC))
    weekdays = stub.PreviewSchedule(request, timeout=10)
    assert weekdays.description == "at 02:30 on weekdays, Europe/Berlin"
    assert [e.note for e in weekdays.explained] == ["", "", ""]
    assert [e.utc_offset for e in weekdays.explained] == ["+02:00"] * 3

    daily = pb.PreviewScheduleRequest(cron="30 2 * * *", time_zone="Europe/Berlin", count=3)
    daily.after.CopyFrom(request.after)
    explained = stub.PreviewSchedule(daily, timeout=10).explained
    assert [(e.local_time, e.utc_offset) for e in explained] == [
        ("2027-03-27T02:30:00", "+01:00"), ("2027-03-28T03:00:00", "+02:00"),
        ("2027-03-29T02:30:00", "+02:00")]
    assert explained[1].note == "02:30 does not exist on 2027-03-28; fires at 03:00 (fixed job)"
    assert explained[1].fire_time.ToDatetime(tzinfo=UTC) == datetime(2027, 3, 28, 1,
                                                                      tzinfo=UTC)

    interval = pb.PreviewScheduleRequest(time_zone="Europe/Berlin", count=3,
                                         every=Duration(seconds=5400))
    interval.after.FromDatetime(datetime(2027, 3, 27, 23, 59, tzinfo=UTC))
    answer = stub.PreviewSchedule(interval, timeout=10)
    assert answer.description.startswith("every 90 minutes on the grid from 1970")
    # 00:00Z, 01:30Z, 03:00Z: 90 minutes apart in real time, 2h30 apart on the wall once.
    assert [e.local_time[11:16] for e in answer.explained] == ["01:00", "03:30", "05:00"]
    assert answer.explained[1].note.startswith("02:00-02:59 do not exist on 2027-03-28")


def test_the_cli_creates_an_interval_job_and_previews_with_notes(
        service: RunningService) -> None:
    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli",
                               "--address", service.address, *args],
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    created = json.loads(cli("jobs", "create", "--name", "cli-every",
                             "--tenant", "interval-" + uuid.uuid4().hex[:6], "--handler", "echo",
                             "--every", "1h30m", "--start-at", "2030-01-01T00:00:00Z",
                             "-o", "json"))["job"]
    assert created["spec"]["every"] == "5400s"
    assert created["next_fire_at"] == "2030-01-01T00:00:00Z"
    shown = cli("preview", "30 2 * * *", "--time-zone", "America/New_York", "--after",
                "2027-03-13T12:00:00Z", "--count", "2", "-o", "table").splitlines()
    assert shown[0] == "at 02:30 every day, America/New_York"
    assert shown[3].endswith("-04:00  02:30 does not exist on 2027-03-14; fires at 03:00 "
                             "(fixed job)")


# Quartz's day fields (issue 20 item 4), in Berlin (UTC+1 in winter, so 09:00 is 08:00Z),
# from 2026-12-04. The days come from the calendar: 2026-12-31 is a Thursday, 2027-01-31 and
# 2027-02-28 Sundays; 15 January is a Friday in 2027, a Saturday in 2028, a Monday in 2029.
@pytest.mark.parametrize(("cron", "days"), [
    ("0 9 L * *", ["2026-12-31", "2027-01-31", "2027-02-28"]),          # last day
    ("0 9 LW * *", ["2026-12-31", "2027-01-29", "2027-02-26"]),         # last weekday
    ("0 9 15W 1 *", ["2027-01-15", "2028-01-14", "2029-01-15"]),       # nearest weekday
    ("0 9 * * 1#2", ["2026-12-14", "2027-01-11", "2027-02-08"]),        # second Monday
    ("0 9 * * 5L", ["2026-12-25", "2027-01-29", "2027-02-26"]),         # last Friday
])
def test_quartz_day_fields_preview_over_grpc(service: RunningService, cron: str,
                                             days: list[str]) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    request = pb.PreviewScheduleRequest(cron=cron, time_zone="Europe/Berlin", count=3)
    request.after.FromDatetime(datetime(2026, 12, 4, tzinfo=UTC))
    answer = stub.PreviewSchedule(request, timeout=30)
    assert [t.ToDatetime(tzinfo=UTC) for t in answer.fire_times] == [
        datetime.fromisoformat(day + "T08:00:00+00:00") for day in days]


def test_a_last_weekday_job_is_created_and_the_cli_previews_second_mondays(
        service: RunningService) -> None:
    stub = pb_grpc.JobServiceStub(service.channel)
    spec = pb.JobSpec(name="month-end", tenant="quartz-" + uuid.uuid4().hex[:6],
                      handler="echo", cron="0 9 LW * *", time_zone="Europe/Berlin")
    spec.start_at.FromDatetime(datetime(2030, 1, 1, tzinfo=UTC))
    job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=spec),
                         timeout=30).job
    # 2030-01-31 is a Thursday: the month's last weekday.
    assert job.next_fire_at.ToDatetime(tzinfo=UTC) == datetime(2030, 1, 31, 8, tzinfo=UTC)
    done = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli",
                           "--address", service.address, "preview", "0 9 * * 1#2",
                           "--time-zone", "Europe/Berlin", "--after", "2030-01-01T00:00:00Z",
                           "--count", "2", "-o", "json"],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    # January 2030 begins on a Tuesday (Mondays 7 and 14), February on a Friday (4 and 11).
    assert json.loads(done.stdout)["fire_times"] == [
        "2030-01-14T08:00:00Z", "2030-02-11T08:00:00Z"]
