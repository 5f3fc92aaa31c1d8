"""A job's start timeout crosses the api and the log unchanged; absent stays absent (the
scheduler's default), and specs stored before the option existed read as absent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_from_record, spec_to_record
from cronlog.infra.grpc.convert import spec_in, spec_out
from cronlog.v1 import job_service_pb2 as pb
from tests.support.cli_spec import cli_spec

SAMPLES = Path(__file__).parents[1] / "avro" / "samples"
SPEC = JobSpec(name="n", tenant="t", queue="default", handler="echo", cron="* * * * *")


def _request(start_timeout: Duration | None) -> pb.JobSpec:
    message = pb.JobSpec(name="n", tenant="t", handler="echo", cron="* * * * *")
    if start_timeout is not None:
        message.start_timeout.CopyFrom(start_timeout)
    return message


def test_an_absent_start_timeout_is_none_and_stays_absent() -> None:
    spec = spec_in(_request(None))
    assert spec.start_timeout is None
    assert not spec_out(spec).HasField("start_timeout")


def test_a_start_timeout_round_trips_through_protobuf() -> None:
    spec = spec_in(_request(Duration(seconds=10, nanos=500_000_000)))
    assert spec.start_timeout == timedelta(seconds=10.5)
    message = spec_out(spec)
    assert message.HasField("start_timeout")
    assert message.start_timeout.ToTimedelta() == timedelta(seconds=10.5)
    assert spec_in(message) == spec


def test_a_huge_start_timeout_is_refused_at_the_door_naming_the_field() -> None:
    with pytest.raises(InvalidSpec) as caught:
        spec_in(_request(Duration(seconds=10**15)))
    assert caught.value.field == "spec.start_timeout"


@pytest.mark.parametrize("value", [None, timedelta(seconds=3), timedelta(days=7)])
def test_a_start_timeout_round_trips_through_avro(value: timedelta | None) -> None:
    codec = AvroCodec()
    spec = JobSpec(**{**SPEC.__dict__, "start_timeout": value})
    record = {"job_id": "11111111-2222-3333-4444-555555555555", "version": 1,
              "at": datetime(2026, 1, 1, tzinfo=UTC),
              "request_id": "r", "spec": spec_to_record(spec), "next_fire_at": None}
    _, decoded = codec.decode(codec.encode("JobCreated", record))
    assert decoded["spec"]["start_timeout_ms"] == (
        None if value is None else int(value.total_seconds() * 1000))
    assert spec_from_record(decoded["spec"]).start_timeout == value


@pytest.mark.parametrize("sample", ["JobCreated.v2.bin", "UpdateJob.v3.bin", "CreateJob.v3.bin"])
def test_a_spec_stored_before_the_option_reads_with_the_schedulers_default(sample: str) -> None:
    _, record = AvroCodec().decode((SAMPLES / sample).read_bytes())
    assert record["spec"]["start_timeout_ms"] is None
    assert spec_from_record(record["spec"]).start_timeout is None


def test_the_cli_sets_a_start_timeout_on_create_and_keeps_it_on_update() -> None:
    created = cli_spec("--name", "n", "--tenant", "t", "--handler", "echo", "--cron",
                        "* * * * *", "--start-timeout-seconds", "2.5")
    assert created.start_timeout.ToTimedelta() == timedelta(seconds=2.5)
    kept = cli_spec("j", "--timeout-seconds", "9", base=created)
    assert kept.start_timeout.ToTimedelta() == timedelta(seconds=2.5)
    changed = cli_spec("j", "--start-timeout-seconds", "60", base=created)
    assert changed.start_timeout.ToTimedelta() == timedelta(seconds=60)
    assert not cli_spec("--name", "n").HasField("start_timeout")
