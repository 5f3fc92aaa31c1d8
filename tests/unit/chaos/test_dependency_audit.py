"""The chaos suite's dependency audit finds each way a dependent run can be wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from cronlog.domain.dependency import dependent_run_id
from tests.chaos.dependency_audit import audit_dependencies

T = datetime(2026, 1, 1, tzinfo=UTC)
U1, U2, D = str(uuid4()), str(uuid4()), str(uuid4())


def upstream_run(job: str, second: int, ok: bool = True) -> tuple[str, list[tuple[str, Any]]]:
    run = str(uuid4())
    events: list[tuple[str, Any]] = [("RunScheduled", {
        "run_id": run, "job_id": job, "trigger": "schedule",
        "scheduled_at": T + timedelta(seconds=second)})]
    if ok:
        events.append(("AttemptSucceeded", {"run_id": run, "job_id": job}))
    return run, events


def dependent_run(job: str, second: int, upstream_runs: list[str],
                  run_id: UUID | None = None, depth: int = 1) -> tuple[str, dict[str, Any]]:
    rid = run_id or dependent_run_id(UUID(job), [UUID(r) for r in upstream_runs])
    return ("RunScheduled", {"run_id": str(rid), "job_id": job, "trigger": "dependency",
                             "scheduled_at": T + timedelta(seconds=second + 1),
                             "logical_time": T + timedelta(seconds=second),
                             "upstream_run_ids": upstream_runs, "depth": depth})


def test_a_fan_in_with_its_one_run_per_logical_time_passes() -> None:
    a, ea = upstream_run(U1, 0)
    b, eb = upstream_run(U2, 0)
    _, ec = upstream_run(U1, 1)
    _, ed = upstream_run(U2, 1, ok=False)  # 00:01 never qualifies: no run is right
    events = [*ea, *eb, *ec, *ed, dependent_run(D, 0, [a, b])]
    result = audit_dependencies(events, {D: [U1, U2]})
    assert not any(result.violations.values()), result.summary()
    assert result.dependent_runs == 1 and result.upstream_successes == 3


def test_missing_doubled_unfounded_and_misnamed_runs_are_each_found() -> None:
    a, ea = upstream_run(U1, 0)
    _, eb = upstream_run(U1, 1)
    c, ec = upstream_run(U1, 2, ok=False)
    d, ed = upstream_run(U1, 3)
    events = [*ea, *eb, *ec, *ed,
              dependent_run(D, 0, [a]), dependent_run(D, 0, [a]),       # doubled
              dependent_run(D, 2, [c]),                                 # unfounded
              dependent_run(D, 3, [d], run_id=uuid4())]                 # another id
    result = audit_dependencies(events, {D: [U1]})
    assert result.doubled == [(D, T)]
    assert result.missing == [(D, T + timedelta(seconds=1))]
    assert len(result.unfounded) == 1 and len(result.wrong_ids) == 1
