from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.projections.state import (
    JobRow,
    RunRow,
    UnknownEvent,
    apply_job_event,
    apply_run_event,
)
from tests.support.state_writer import NoWrites

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Writer(NoWrites):
    jobs: dict[UUID, JobRow] = field(default_factory=dict)
    job_changes: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[UUID, RunRow] = field(default_factory=dict)
    run_changes: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def insert_job(self, row: JobRow) -> None:
        self.jobs[row.job_id] = row

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        self.job_changes.append({"version": version, **changes})

    def insert_run(self, row: RunRow) -> None:
        self.runs[row.run_id] = row

    def update_run(self, run_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        self.run_changes.append({"version": version, **changes})

    def record_request(self, request_id: str, partition: int, job_id: UUID,
                       job_version: int, command: str | None = None,
                       digest: str | None = None) -> None:
        self.requests.append(request_id)


def test_job_events_keep_the_due_index_current() -> None:
    writer, job_id = Writer(), uuid4()
    spec = {"tenant": "t", "name": "n"}
    apply_job_event(writer, 3, "JobCreated", {"job_id": job_id, "version": 1, "at": T0,
                                              "request_id": "r1", "spec": spec,
                                              "next_fire_at": T0}, b"raw")
    assert writer.jobs[job_id].partition == 3 and writer.jobs[job_id].spec_event == b"raw"
    assert writer.requests == ["r1"]
    apply_job_event(writer, 3, "JobFireAdvanced", {"job_id": job_id, "version": 2, "at": T0,
                                                   "fired_at": T0, "run_id": uuid4(),
                                                   "next_fire_at": None}, b"")
    assert "revision" not in writer.job_changes[-1], "a fire leaves the revision"
    apply_job_event(writer, 3, "JobCompleted", {"job_id": job_id, "version": 3, "at": T0}, b"")
    assert writer.job_changes[-1] == {"version": 3, "status": "completed", "next_fire_at": None,
                                      "revision": 3}


def test_run_events_track_the_current_attempt_and_unknown_events_stop_it() -> None:
    writer, run_id = Writer(), uuid4()
    apply_run_event(writer, 0, "RunScheduled", {
        "run_id": run_id, "job_id": uuid4(), "version": 1, "at": T0, "scheduled_at": T0,
        "not_before": T0}, b"raw")
    apply_run_event(writer, 0, "AttemptStarted", {"run_id": run_id, "version": 3, "at": T0,
                                                  "attempt": 1}, b"")
    assert writer.run_changes[-1]["status"] == "running"
    with pytest.raises(UnknownEvent):
        apply_run_event(writer, 0, "RunExploded", {"run_id": run_id, "version": 4, "at": T0},
                        b"")


def test_a_redrive_sets_the_runs_attempt_base_for_its_retry_policy() -> None:
    writer, run_id = Writer(), uuid4()
    apply_run_event(writer, 0, "RunFailed", {"run_id": run_id, "version": 7, "at": T0,
                                             "reason": "attempt 3 of 3 failed"}, b"")
    apply_run_event(writer, 0, "RunRedriven", {
        "run_id": run_id, "version": 8, "at": T0, "request_id": "r", "requested_by": "t",
        "attempts_before": 3}, b"")
    assert writer.run_changes[-2]["status"] == "dead_lettered"
    assert {k: writer.run_changes[-1][k] for k in ("status", "attempt_base")} == {
        "status": "scheduled", "attempt_base": 3}
