"""The committed generated code matches proto/, and the service has every RPC."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cronlog.v1 import job_service_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
RPCS = {"CreateJob", "CreateJobs", "GetJob", "ListJobs", "UpdateJob", "PauseJob", "ResumeJob", "DeleteJob",
        "TriggerJob", "BackfillJob", "GetRun", "ListRuns", "CancelRun", "RedriveRun",
        "RedriveDeadLetters", "RestoreJob",
        "PreviewSchedule",
        "CreateCalendar", "UpdateCalendar", "GetCalendar", "ListCalendars", "ListWorkers",
        "CreateChannel", "UpdateChannel", "DeleteChannel", "GetChannel", "ListChannels",
        "RotateChannelSecret", "ListAlertDeliveries", "TestChannel", "VerifyHistory", "WhatIf"}


def test_service_has_every_rpc() -> None:
    service = pb.DESCRIPTOR.services_by_name["JobService"]
    assert service.full_name == "cronlog.v1.JobService"
    assert set(service.methods_by_name) == RPCS


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "gen_proto.sh"), str(tmp_path)], check=True,
                   capture_output=True)
    committed = ROOT / "src" / "cronlog" / "v1"
    generated = tmp_path / "cronlog" / "v1"
    names = sorted(p.name for p in generated.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.suffix in (".py", ".pyi"))
    for name in names:
        assert (generated / name).read_text() == (committed / name).read_text(), (
            f"{name} is stale: run `make proto`")


# Issue 16's additions, by number: wire compatibility means these never change (buf's
# FILE breaking rules say the same of every field; this names the new ones).
DEPENDENCY_FIELDS = {
    ("JobSpec", "after"): (19, "Dependency"), ("Dependency", "job_ids"): (1, None),
    ("Dependency", "condition"): (2, "DependencyCondition"),
    ("Dependency", "wait_window"): (3, "Duration"),
    ("Job", "dependent_job_ids"): (9, None),
    ("TriggerJobRequest", "cascade"): (3, None), ("BackfillJobRequest", "cascade"): (5, None),
    ("Run", "upstream_run_ids"): (16, None), ("Run", "logical_time"): (17, "Timestamp"),
    ("Run", "cascade"): (18, None), ("Run", "depth"): (19, None),
}


def test_dependency_fields_keep_their_numbers() -> None:
    for (message, name), (number, type_name) in DEPENDENCY_FIELDS.items():
        field = pb.DESCRIPTOR.message_types_by_name[message].fields_by_name[name]
        assert field.number == number, f"{message}.{name}"
        kind = field.message_type or field.enum_type
        assert (kind.name if kind else None) == type_name, f"{message}.{name}"


def test_after_is_a_third_kind_of_schedule() -> None:
    oneof = pb.JobSpec.DESCRIPTOR.oneofs_by_name["schedule"]
    assert [f.name for f in oneof.fields][:3] == ["cron", "at", "after"]
    assert pb.DependencyCondition.Name(pb.DependencyCondition.ValueType(0)) == (
        "DEPENDENCY_CONDITION_UNSPECIFIED")


def test_every_is_a_fourth_kind_of_schedule_and_preview_explains() -> None:
    oneof = pb.JobSpec.DESCRIPTOR.oneofs_by_name["schedule"]
    assert [(f.name, f.number) for f in oneof.fields][3] == ("every", 20)
    every = pb.JobSpec.DESCRIPTOR.fields_by_name["every"].message_type
    assert every is not None and every.name == "Duration"
    request = pb.PreviewScheduleRequest.DESCRIPTOR.fields_by_name["every"]
    assert request.message_type is not None
    assert (request.number, request.message_type.name) == (7, "Duration")
    response = pb.PreviewScheduleResponse.DESCRIPTOR.fields_by_name
    assert (response["explained"].number, response["description"].number) == (2, 3)
    assert [f.name for f in pb.ExplainedFireTime.DESCRIPTOR.fields] == [
        "fire_time", "local_time", "utc_offset", "note"]
