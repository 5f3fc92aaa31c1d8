"""A job's notify rule (issue 37) through the gRPC conversion, the Avro records, the domain's
second check and the CLI's options."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.notify_rule import AlertKind, NotifyRule, notify_rule
from cronlog.domain.spec import JobSpec, validate_spec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_from_record, spec_to_record
from cronlog.infra.grpc.convert import spec_in, spec_out
from cronlog.v1 import job_service_pb2 as pb
from tests.support.cli_spec import cli_spec

SAMPLES = Path(__file__).parents[1] / "avro" / "samples"
SPEC = JobSpec(name="n", tenant="t", queue="default", handler="echo", cron="* * * * *")


def _request(**notify: object) -> pb.JobSpec:
    message = pb.JobSpec(name="n", tenant="t", handler="echo", cron="* * * * *")
    message.notify.CopyFrom(pb.NotifyRule(**notify))  # type: ignore[arg-type]
    return message


def test_no_rule_is_none_and_stays_absent() -> None:
    spec = spec_in(pb.JobSpec(name="n", tenant="t", handler="echo", cron="* * * * *"))
    assert spec.notify is None
    assert not spec_out(spec).HasField("notify")


def test_a_rule_round_trips_through_protobuf_with_its_defaults() -> None:
    spec = spec_in(_request(channels=["ops", "mail"], on=["started_late", "failed"],
                            late_after=Duration(seconds=90)))
    assert spec.notify == NotifyRule(("ops", "mail"),
                                     frozenset({AlertKind.FAILED, AlertKind.STARTED_LATE}),
                                     timedelta(seconds=90))
    message = spec_out(spec)
    # Kinds come back in one order whatever the request's: a retry digests alike.
    assert list(message.notify.on) == ["failed", "started_late"]
    assert spec_in(message) == spec
    plain = spec_in(_request(channels=["ops"]))
    assert plain.notify is not None
    assert plain.notify.on == frozenset({AlertKind.DEAD_LETTERED})
    assert plain.notify.late_after == timedelta(minutes=1)


@pytest.mark.parametrize(("notify", "field"), [
    (dict(channels=[]), "spec.notify.channels"),
    (dict(channels=[f"c{i}" for i in range(6)]), "spec.notify.channels"),
    (dict(channels=["ops", "ops"]), "spec.notify.channels[1]"),
    (dict(channels=["bad name!"]), "spec.notify.channels[0]"),
    (dict(channels=["ops"], on=["exploded"]), "spec.notify.on"),
    (dict(channels=["ops"], on=["failed", "failed"]), "spec.notify.on"),
    (dict(channels=["ops"], late_after=Duration(seconds=0)), "spec.notify.late_after"),
    (dict(channels=["ops"], late_after=Duration(seconds=86_401)), "spec.notify.late_after"),
    (dict(channels=["ops"], late_after=Duration(seconds=10**15)), "spec.notify.late_after"),
])
def test_a_bad_rule_is_refused_at_the_door_naming_the_field(notify: dict[str, object],
                                                            field: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        spec_in(_request(**notify))
    assert caught.value.field == field


def test_the_domain_checks_a_rule_again() -> None:
    rule = NotifyRule(("ops",) * 2, frozenset({AlertKind.FAILED}))
    with pytest.raises(InvalidSpec) as caught:
        validate_spec(JobSpec(**{**SPEC.__dict__, "notify": rule}))
    assert caught.value.field == "spec.notify.channels[1]"
    good = notify_rule(["ops"], ["recovered"])
    assert validate_spec(JobSpec(**{**SPEC.__dict__, "notify": good})).notify == good


@pytest.mark.parametrize("rule", [None, notify_rule(["ops", "mail"], ["set_aside", "missed"],
                                                    timedelta(seconds=5))])
def test_a_rule_round_trips_through_avro(rule: NotifyRule | None) -> None:
    codec = AvroCodec()
    spec = JobSpec(**{**SPEC.__dict__, "notify": rule})
    record = {"job_id": "11111111-2222-3333-4444-555555555555", "version": 1,
              "at": datetime(2026, 1, 1, tzinfo=UTC),
              "request_id": "r", "spec": spec_to_record(spec), "next_fire_at": None}
    _, decoded = codec.decode(codec.encode("JobCreated", record))
    assert spec_from_record(decoded["spec"]).notify == rule


def test_a_record_with_an_unknown_kind_is_refused_as_read_naming_the_field() -> None:
    record = spec_to_record(JobSpec(**{**SPEC.__dict__, "notify": notify_rule(["ops"])}))
    record["notify"]["on"] = ["exploded"]
    with pytest.raises(InvalidSpec) as caught:
        spec_from_record(record)
    assert caught.value.field == "spec.notify.on"


@pytest.mark.parametrize("sample", ["JobCreated.v6.bin", "UpdateJob.v7.bin", "CreateJob.v7.bin"])
def test_a_spec_stored_before_notify_rules_has_none(sample: str) -> None:
    _, record = AvroCodec().decode((SAMPLES / sample).read_bytes())
    assert record["spec"]["notify"] is None
    assert spec_from_record(record["spec"]).notify is None


def test_the_cli_sets_a_rule_on_create_changes_it_on_update_and_drops_it() -> None:
    created = cli_spec("--name", "n", "--tenant", "t", "--handler", "echo", "--cron",
                        "* * * * *", "--notify", "ops", "--notify", "mail",
                        "--notify-on", "failed", "--notify-on", "started_late",
                        "--notify-late-after", "2m")
    assert list(created.notify.channels) == ["ops", "mail"]
    assert list(created.notify.on) == ["failed", "started_late"]
    assert created.notify.late_after.ToTimedelta() == timedelta(minutes=2)
    kept = cli_spec("j", "--timeout-seconds", "9", base=created)
    assert kept.notify == created.notify
    moved = cli_spec("j", "--notify", "pager", base=created)
    assert list(moved.notify.channels) == ["pager"]
    assert list(moved.notify.on) == ["failed", "started_late"]
    assert not cli_spec("j", "--no-notify", base=created).HasField("notify")
    assert not cli_spec("--name", "n").HasField("notify")
    with pytest.raises(SystemExit):
        cli_spec("--name", "n", "--notify-on", "exploded")
