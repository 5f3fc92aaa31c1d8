"""Checks the invariants on the committed event log itself, not on any projection: every
fire time exactly once, every attempt ended exactly once. Shared by the chaos tests and the
bench's failover workload."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

TERMINAL_ATTEMPT = {"AttemptSucceeded", "AttemptFailed", "AttemptLost", "AttemptTimedOut",
                    "AttemptCancelled"}
TERMINAL_RUN = {"RunSucceeded", "RunFailed", "RunCancelled"}


@dataclass
class LogAudit:
    runs_scheduled: int = 0
    duplicate_fire_times: list[tuple[str, datetime]] = field(default_factory=list)
    missing_fire_times: list[tuple[str, datetime]] = field(default_factory=list)
    attempts: int = 0
    attempts_without_end: list[tuple[str, int]] = field(default_factory=list)
    attempts_ended_twice: list[tuple[str, int]] = field(default_factory=list)
    runs_not_finished: list[str] = field(default_factory=list)
    runs_never_executed: list[str] = field(default_factory=list)
    retried_attempts: int = 0
    lost_attempts: int = 0
    executions: int = 0
    missed_runs: int = 0

    @property
    def violations(self) -> dict[str, int]:
        return {
            "duplicate fire times": len(self.duplicate_fire_times),
            "missing fire times": len(self.missing_fire_times),
            "attempts without a terminal state": len(self.attempts_without_end),
            "attempts with two terminal states": len(self.attempts_ended_twice),
            "runs never executed": len(self.runs_never_executed),
        }

    def waiting_for(self) -> str:
        """What is still outstanding, with a few samples; empty once the log is complete."""
        parts = []
        for what, items in (("missing fire times", self.missing_fire_times),
                            ("runs not finished", self.runs_not_finished),
                            ("attempts without end", self.attempts_without_end)):
            if items:
                sample = ", ".join(map(str, items[:3]))
                parts.append(f"{len(items)} {what} (e.g. {sample})")
        return "; ".join(parts)

    def summary(self) -> str:
        lines = [f"runs scheduled: {self.runs_scheduled}", f"attempts: {self.attempts}",
                 f"attempts lost (retried): {self.lost_attempts}",
                 f"retries: {self.retried_attempts}", f"handler executions: {self.executions}",
                 f"runs recorded as missed: {self.missed_runs}",
                 f"runs not finished: {len(self.runs_not_finished)}"]
        lines += [f"{name}: {count}" for name, count in self.violations.items()]
        return "\n".join(lines)


def audit(events: Iterable[tuple[str, Mapping[str, Any]]],
          expected_fire_times: Mapping[str, Iterable[datetime]],
          executions: Iterable[str]) -> LogAudit:
    result = LogAudit()
    fire_times: Counter[tuple[str, datetime]] = Counter()
    dispatched: set[tuple[str, int]] = set()
    ended: Counter[tuple[str, int]] = Counter()
    finished: set[str] = set()
    run_ids: set[str] = set()
    ranges: list[tuple[str, datetime, datetime]] = []
    for name, record in events:
        run_id = str(record.get("run_id"))
        if name == "RunScheduled":
            # Manual runs and backfills re-run fire times on purpose, under their own ids.
            if record.get("trigger", "schedule") == "schedule":
                fire_times[(str(record["job_id"]), record["scheduled_at"])] += 1
            run_ids.add(run_id)
            if record.get("attempt"):
                # RunScheduled v2 dispatches the first attempt itself.
                dispatched.add((run_id, int(record["attempt"])))
        elif name in ("RunMissed", "RunSkipped"):
            # Recorded, not run, by the misfire policy: present, finished, not executed. A
            # dependent run recorded so is of a logical time, not a fire time of its job.
            if record.get("trigger", "schedule") == "schedule":
                fire_times[(str(record["job_id"]), record["scheduled_at"])] += 1
            finished.add(run_id)
            result.missed_runs += 1
        elif name == "AttemptDispatched":
            dispatched.add((run_id, int(record["attempt"])))
            if int(record["attempt"]) > 1:
                result.retried_attempts += 1
        elif name in TERMINAL_ATTEMPT:
            ended[(run_id, int(record["attempt"]))] += 1
            if name == "AttemptLost":
                result.lost_attempts += 1
            elif name == "AttemptSucceeded":
                finished.add(run_id)  # a succeeded attempt ends its run
        elif name in TERMINAL_RUN:
            finished.add(run_id)
        elif name == "JobFireTimesMissed":
            # Recorded as a range (job-events), not one run each.
            ranges.append((str(record["job_id"]), record["first"], record["last"]))
            result.missed_runs += int(record["count"])
    for job_id, times in expected_fire_times.items():
        for first, last in [(f, t) for j, f, t in ranges if j == job_id]:
            for time in times:
                if first <= time <= last:
                    fire_times[(job_id, time)] += 1
    result.runs_scheduled = sum(fire_times.values())
    result.duplicate_fire_times = sorted(k for k, n in fire_times.items() if n > 1)
    for job_id, times in expected_fire_times.items():
        result.missing_fire_times += [(job_id, t) for t in times if (job_id, t) not in fire_times]
    result.attempts = len(dispatched)
    result.attempts_without_end = sorted(a for a in dispatched if ended[a] == 0)
    result.attempts_ended_twice = sorted(a for a, n in ended.items() if n > 1)
    result.runs_not_finished = sorted(run_ids - finished)
    executed = Counter(executions)
    result.executions = sum(executed.values())
    result.runs_never_executed = sorted(r for r in run_ids if not executed[r])
    return result
