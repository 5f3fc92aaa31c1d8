"""The auditor itself can fail: it finds each kind of violation in a made-up log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.chaos.log_audit import audit

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_audit_finds_every_kind_of_violation() -> None:
    events = [
        ("RunScheduled", {"run_id": "r1", "job_id": "j", "scheduled_at": T0}),
        ("RunScheduled", {"run_id": "r1b", "job_id": "j", "scheduled_at": T0}),
        ("AttemptDispatched", {"run_id": "r1", "attempt": 1}),
        ("AttemptSucceeded", {"run_id": "r1", "attempt": 1}),
        ("AttemptLost", {"run_id": "r1", "attempt": 1}),
        ("AttemptDispatched", {"run_id": "r1b", "attempt": 1}),
    ]
    result = audit(events, {"j": [T0, T0 + timedelta(seconds=1)]}, ["r1"])
    assert result.violations == {
        "duplicate fire times": 1, "missing fire times": 1,
        "attempts without a terminal state": 1, "attempts with two terminal states": 1,
        "runs never executed": 1,
    }


def test_a_clean_log_passes() -> None:
    events: list[tuple[str, dict[str, object]]] = [
        ("RunScheduled", {"run_id": "r1", "job_id": "j", "scheduled_at": T0}),
        ("AttemptDispatched", {"run_id": "r1", "attempt": 1}),
        ("AttemptSucceeded", {"run_id": "r1", "attempt": 1}),
        ("RunSucceeded", {"run_id": "r1"}),
    ]
    result = audit(events, {"j": [T0]}, ["r1", "r1"])
    assert not any(result.violations.values())
    assert result.executions == 2


def test_a_range_of_missed_fire_times_counts_each_of_them_as_recorded() -> None:
    events = [("JobFireTimesMissed", {"job_id": "j", "first": T0,
                                      "last": T0 + timedelta(seconds=2), "count": 3})]
    result = audit(events, {"j": [T0 + timedelta(seconds=s) for s in range(4)]}, [])
    assert result.missing_fire_times == [("j", T0 + timedelta(seconds=3))]
    assert result.missed_runs == 3 and result.runs_scheduled == 3
