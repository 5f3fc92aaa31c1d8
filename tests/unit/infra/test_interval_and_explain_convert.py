"""Interval jobs and explained previews across the edges (issue 20): gRPC messages, the
Avro log (new versions, and old versions read as they were), and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.cli.commands import preview_request
from cronlog.cli.job_spec import UsageError, job_spec
from cronlog.cli.output import as_table
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule import CronSchedule, preview
from cronlog.domain.schedule_explained import describe, explain
from cronlog.domain.spec import JobSpec, validate_spec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_from_record, spec_to_record
from cronlog.infra.entrypoints.cli import _parser
from cronlog.infra.grpc.convert import preview_out, spec_in, spec_out, utc_offset_text
from cronlog.v1 import job_service_pb2 as pb
from tests.unit.avro.examples import COMMAND, SPEC_V3

START = datetime(2027, 3, 14, 5, 0, tzinfo=UTC)


def _interval_spec() -> JobSpec:
    return validate_spec(JobSpec(name="rate", tenant="acme", queue="default", handler="echo",
                                 every=timedelta(minutes=90), start_at=START,
                                 time_zone="Europe/Berlin"))


def test_every_becomes_the_domains_interval_and_comes_back() -> None:
    message = pb.JobSpec(name="rate", tenant="acme", handler="echo",
                         every=Duration(seconds=5400), start_at=spec_out(_interval_spec()).start_at,
                         time_zone="Europe/Berlin")
    spec = validate_spec(spec_in(message))
    assert spec == _interval_spec()
    out = spec_out(spec)
    assert out.WhichOneof("schedule") == "every"
    assert out.every.ToTimedelta() == timedelta(minutes=90)
    assert spec_in(out) == spec


@pytest.mark.parametrize(("every", "message"), [
    (Duration(seconds=1, nanos=500), "whole number of milliseconds"),
    (Duration(seconds=367 * 86_400), "at most 366 days"),
])
def test_a_bad_every_is_refused_at_the_edge_naming_the_field(every: Duration,
                                                              message: str) -> None:
    with pytest.raises(InvalidSpec, match=message) as refused:
        spec_in(pb.JobSpec(name="n", tenant="t", handler="echo", every=every))
    assert refused.value.field == "spec.schedule.every"


def test_an_interval_spec_travels_through_the_log_in_the_newest_versions() -> None:
    codec = AvroCodec()
    spec = _interval_spec()
    record: dict[str, Any] = {**COMMAND, "spec": spec_to_record(spec), "correlation_id": None,
                              "calendar_version": 0, "calendar_exclusions": []}
    assert record["spec"]["schedule"] == {"kind": "every", "cron": None, "at": None,
                                          "every_ms": 5_400_000}
    name, decoded = codec.decode(codec.encode("CreateJob", record))
    assert name == "CreateJob"
    assert spec_from_record(decoded["spec"]) == spec


def test_a_spec_written_before_intervals_reads_as_before() -> None:
    codec = AvroCodec()
    old = next(v for v in codec.versions() if (v.name, v.version) == ("CreateJob", 5))
    data = codec.encode_with(old, {**COMMAND, "spec": {**SPEC_V3, "after": None},
                                   "correlation_id": None})
    _, decoded = codec.decode(data)
    assert decoded["spec"]["schedule"]["every_ms"] is None
    spec = spec_from_record(decoded["spec"])
    assert (spec.cron, spec.every) == ("30 2 * * *", None)


def test_a_preview_is_explained_in_the_response() -> None:
    schedule = CronSchedule.parse("30 2 * * *", "America/New_York")
    after = datetime(2027, 3, 13, 12, tzinfo=UTC)
    times = preview(schedule, after, 2)
    response = preview_out(explain(schedule, schedule.zone, after, times,
                                   describe(schedule, "America/New_York")))
    assert response.description == "at 02:30 every day, America/New_York"
    assert [t.ToDatetime(tzinfo=UTC) for t in response.fire_times] == times
    first = response.explained[0]
    assert (first.local_time, first.utc_offset) == ("2027-03-14T03:00:00", "-04:00")
    assert first.note == "02:30 does not exist on 2027-03-14; fires at 03:00 (fixed job)"
    assert response.explained[1].note == ""


@pytest.mark.parametrize(("offset", "text"), [
    (timedelta(hours=-4), "-04:00"), (timedelta(hours=5, minutes=30), "+05:30"),
    (timedelta(hours=12, minutes=45), "+12:45"), (timedelta(0), "+00:00"),
    (timedelta(minutes=-(4 * 60 + 56), seconds=-2), "-04:56:02"),
])
def test_utc_offsets_are_written_as_iso_offsets(offset: timedelta, text: str) -> None:
    assert utc_offset_text(offset) == text


def test_the_cli_creates_an_interval_job() -> None:
    args = _parser().parse_args(["jobs", "create", "--name", "n", "--tenant", "t",
                                 "--handler", "echo", "--every", "1h30m",
                                 "--start-at", "2027-03-14T05:00:00Z"])
    spec = job_spec(args)
    assert spec.WhichOneof("schedule") == "every"
    assert spec.every.ToTimedelta() == timedelta(minutes=90)


def test_the_cli_refuses_every_with_another_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["jobs", "create", "--name", "n", "--tenant", "t",
                              "--handler", "echo", "--every", "90s", "--cron", "* * * * *"])
    assert exited.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_the_cli_previews_an_interval_or_a_cron_expression_not_both() -> None:
    args = _parser().parse_args(["preview", "--every", "90m", "--start-at",
                                 "2027-03-14T05:00:00Z"])
    request = preview_request(args)
    assert request.every.ToTimedelta() == timedelta(minutes=90)
    assert request.cron == ""
    for options in (["preview"], ["preview", "* * * * *", "--every", "90m"]):
        with pytest.raises(UsageError, match="a cron expression or --every"):
            preview_request(_parser().parse_args(options))


def test_the_cli_shows_the_description_and_each_fire_times_note() -> None:
    response = pb.PreviewScheduleResponse(
        description="at 02:30 every day, America/New_York",
        explained=[pb.ExplainedFireTime(local_time="2027-03-14T03:00:00", utc_offset="-04:00",
                                        note="02:30 does not exist on 2027-03-14; fires at "
                                             "03:00 (fixed job)")])
    response.explained[0].fire_time.FromDatetime(datetime(2027, 3, 14, 7, tzinfo=UTC))
    shown = as_table(response, "America/New_York").splitlines()
    assert shown[0] == "at 02:30 every day, America/New_York"
    assert shown[2].split() == ["FIRE", "TIME", "(UTC)", "LOCAL", "(America/New_York)",
                                "OFFSET", "NOTE"]
    assert shown[3].split("  ")[-1] == ("02:30 does not exist on 2027-03-14; fires at 03:00 "
                                        "(fixed job)")
    assert "-04:00" in shown[3] and "2027-03-14 03:00:00" in shown[3]


def test_the_jobs_table_shows_an_interval() -> None:
    job = pb.Job(job_id="j", spec=spec_out(_interval_spec()))
    assert "every 90m" in as_table(pb.GetJobResponse(job=job))
