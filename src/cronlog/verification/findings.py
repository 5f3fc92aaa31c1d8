"""What `cronlog verify` finds: each violation of a guarantee, named by job, fire time and
run, with the log's events that show it, and the counts of what was proved."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Check(StrEnum):
    """The guarantees verify proves, one name each (docs/verify.md)."""

    # The job's fire moved past a fire time its schedule gave, without a run or a
    # missed record for it.
    FIRE_TIME_SKIPPED = "fire_time_skipped"
    # A fire time, or the next one recorded, is not what the job's schedule gives.
    FIRE_TIME_OFF_SCHEDULE = "fire_time_off_schedule"
    # A fire time whose time passed (beyond the settle margin) and that nothing fired.
    FIRE_TIME_NOT_FIRED = "fire_time_not_fired"
    # More than one run, or a run and a missed record, for one fire time.
    FIRE_TIME_DOUBLED = "fire_time_doubled"
    # A fire of the job whose run is not in the run events.
    FIRE_WITHOUT_RUN = "fire_without_run"
    # A scheduled run of a fire time the job never fired.
    RUN_WITHOUT_FIRE = "run_without_fire"
    # A fire after the job was paused, deleted or completed.
    FIRED_WHILE_INACTIVE = "fired_while_inactive"
    # An attempt dispatched and never ended (beyond the settle margin).
    ATTEMPT_WITHOUT_END = "attempt_without_end"
    # An attempt ended more than once.
    ATTEMPT_ENDED_TWICE = "attempt_ended_twice"
    # An attempt beyond the run's retry policy (its max_attempts, re-drives counted afresh).
    RETRY_BEYOND_POLICY = "retry_beyond_policy"
    # A dependency run whose upstream runs are not what it names, of jobs its `after` did
    # not name, or not ended as its condition asks when it was made; or whose id is not
    # the one derived from them.
    DEPENDENT_RUN_UNFOUNDED = "dependent_run_unfounded"
    # A projection's row that is not what the log implies (verify --projections).
    PROJECTION_DIFFERS = "projection_differs"
    # Versions of a job's events absent from the log (the log was cut or lost events).
    JOB_EVENTS_MISSING = "job_events_missing"
    # Two events of a job with one version: two writers of the job at once.
    JOB_EVENT_REPEATED = "job_event_repeated"
    # A run that ended twice (succeeded and dead-lettered, or either twice) with no
    # re-drive between.
    RUN_ENDED_TWICE = "run_ended_twice"


@dataclass(frozen=True)
class Evidence:
    """One event of the log: which, of what, and when it was written."""

    event: str
    version: int
    at: datetime
    # The run's id for a run event, None for a job event (the violation names the job).
    run_id: str | None = None

    def describe(self) -> str:
        of = f" of run {self.run_id}" if self.run_id else ""
        return f"{self.event} v{self.version}{of} at {self.at.isoformat()}"

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event, "version": self.version, "at": self.at.isoformat(),
                **({"run_id": self.run_id} if self.run_id else {})}


def job_evidence(name: str, record: Mapping[str, Any]) -> Evidence:
    return Evidence(name, int(record["version"]), record["at"])


def run_evidence(name: str, record: Mapping[str, Any]) -> Evidence:
    return Evidence(name, int(record["version"]), record["at"], str(record["run_id"]))


@dataclass(frozen=True)
class Violation:
    check: Check
    job_id: str
    tenant: str
    detail: str
    fire_time: datetime | None = None
    run_id: str | None = None
    evidence: tuple[Evidence, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The report's JSON line."""
        return {"check": str(self.check), "tenant": self.tenant, "job_id": self.job_id,
                "fire_time": self.fire_time.isoformat() if self.fire_time else None,
                "run_id": self.run_id, "detail": self.detail,
                "events": [e.as_dict() for e in self.evidence]}


@dataclass
class Tally:
    """What was looked at: the proof's extent, beside what failed it."""

    jobs: int = 0
    fire_times: int = 0
    runs: int = 0
    missed_fire_times: int = 0
    attempts: int = 0
    retries: int = 0
    manual_runs: int = 0
    dependency_runs: int = 0
    # Upstream runs a dependency run names that verify did not read (another tenant's, or
    # older than the run events read): not judged.
    unjudged_upstreams: int = 0

    def add(self, other: Tally) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class JobVerdict:
    job_id: str
    tenant: str
    tally: Tally = field(default_factory=Tally)
    violations: list[Violation] = field(default_factory=list)

    def violate(self, check: Check, detail: str, fire_time: datetime | None = None,
                run_id: str | None = None, evidence: tuple[Evidence, ...] = ()) -> None:
        self.violations.append(Violation(check, self.job_id, self.tenant, detail, fire_time,
                                         run_id, evidence))
