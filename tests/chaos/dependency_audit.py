"""Invariant 11 checked on the committed event log: every upstream run end that meets a
dependent's condition made exactly one dependent run, with the id derived from the upstream
runs, and no dependent run exists without such ends (docs/dependencies.md, "What the chaos
audit asserts"). Dependents here follow on success, within a window longer than the run."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.domain.dependency import dependent_run_id

DEPENDENCY_RUN = ("RunScheduled", "RunMissed", "RunSkipped")


@dataclass
class DependencyAudit:
    upstream_successes: int = 0
    dependent_runs: int = 0
    # (dependent, logical time) whose upstreams all succeeded but that has no dependent run.
    missing: list[tuple[str, datetime]] = field(default_factory=list)
    # ... that has more than one.
    doubled: list[tuple[str, datetime]] = field(default_factory=list)
    # Dependent runs with no such upstream ends, or other upstream runs than those.
    unfounded: list[str] = field(default_factory=list)
    wrong_ids: list[str] = field(default_factory=list)
    deeper_than_one: list[str] = field(default_factory=list)

    @property
    def violations(self) -> dict[str, int]:
        return {"dependent runs missing": len(self.missing),
                "dependent runs doubled": len(self.doubled),
                "dependent runs without their upstream ends": len(self.unfounded),
                "dependent runs with another id than derived": len(self.wrong_ids),
                "dependent runs of the wrong depth": len(self.deeper_than_one)}

    def summary(self) -> str:
        lines = [f"upstream runs succeeded: {self.upstream_successes}",
                 f"dependent runs: {self.dependent_runs}"]
        lines += [f"{name}: {count}" for name, count in self.violations.items()]
        return "\n".join(lines)


def audit_dependencies(events: Iterable[tuple[str, Mapping[str, Any]]],
                       dependents: Mapping[str, Sequence[str]]) -> DependencyAudit:
    """`dependents`: each dependent job id and the upstream job ids it runs after (on
    success). Only scheduled upstream runs are in the chain the audit follows."""
    result = DependencyAudit()
    fire_time_of: dict[str, tuple[str, datetime]] = {}
    succeeded: set[str] = set()
    made: dict[tuple[str, datetime], list[Mapping[str, Any]]] = defaultdict(list)
    followed = {u for ups in dependents.values() for u in ups}
    for name, record in events:
        run_id = str(record.get("run_id"))
        trigger = record.get("trigger", "schedule")
        if name == "RunScheduled" and trigger == "schedule" and str(record["job_id"]) in followed:
            fire_time_of[run_id] = (str(record["job_id"]), record["scheduled_at"])
        elif name == "AttemptSucceeded":
            succeeded.add(run_id)
        if name in DEPENDENCY_RUN and trigger == "dependency":
            made[(str(record["job_id"]), record["logical_time"])].append(record)
    by_time: dict[tuple[str, datetime], str] = {
        (job, time): run for run, (job, time) in fire_time_of.items() if run in succeeded}
    result.upstream_successes = len(by_time)
    times = {time for (_, time) in by_time}
    for dependent, upstreams in dependents.items():
        for time in sorted(times):
            ends = [by_time.get((u, time)) for u in upstreams]
            runs = made.get((dependent, time), [])
            if all(ends) and not runs:
                result.missing.append((dependent, time))
            elif len(runs) > 1:
                result.doubled.append((dependent, time))
    for (dependent, time), runs in made.items():
        result.dependent_runs += len(runs)
        upstreams = dependents.get(dependent, ())
        ends = [by_time.get((u, time)) for u in upstreams]
        for record in runs:
            named = sorted(str(u) for u in record.get("upstream_run_ids") or ())
            if not all(ends) or named != sorted(str(e) for e in ends):
                result.unfounded.append(str(record["run_id"]))
            elif str(record["run_id"]) != str(dependent_run_id(
                    UUID(dependent), [UUID(str(e)) for e in ends])):
                result.wrong_ids.append(str(record["run_id"]))
            if int(record.get("depth", 0)) != 1:
                result.deeper_than_one.append(str(record["run_id"]))
    return result
