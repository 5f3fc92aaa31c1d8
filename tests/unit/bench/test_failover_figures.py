"""The failover workload's timeline and figures, from made-up values."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

import pytest

from cronlog_dev.bench.failover_figures import (
    SETTLE_S,
    Audit,
    FailoverResult,
    WindowFigures,
    plan,
    render_failover,
    seconds_over_target,
    verdict,
)
from cronlog_dev.bench.options import add_arguments, from_namespace
from cronlog_dev.bench.results import render_table, rows, to_jsonable
from cronlog_dev.bench.role_cpu import RoleCpu
from cronlog_dev.bench.start_lag import RunStart
from cronlog_dev.bench.stats import LagSummary
from cronlog_dev.bench.takeover_figures import LoggedTake, takeover


def test_each_event_is_judged_by_the_fire_times_around_it_and_no_run_twice() -> None:
    timeline = plan(30)
    baseline, kill, added = timeline.spans
    assert (baseline.kind, kill.kind, added.kind) == ("baseline", "kill", "added")
    assert baseline.start_s == SETTLE_S and baseline.end_s == kill.start_s
    assert (kill.start_s, kill.end_s) == (timeline.kill_s - 30, timeline.kill_s + 30)
    assert (added.start_s, added.end_s) == (timeline.add_s - 30, timeline.add_s + 30)
    assert kill.end_s == added.start_s, "contiguous, not overlapping"
    assert timeline.seconds == added.end_s, "fire times run until the last window ends"
    assert "kill -9" in kill.label and "scheduler 4 added" in added.label


def test_a_plan_needs_a_window() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        plan(0)
    assert plan(1).seconds == SETTLE_S + 5


def window(kind: str, p99: float | None, not_started: int = 0) -> WindowFigures:
    lag = LagSummary(0 if p99 is None else 1000, None if p99 is None else 10.0, p99,
                     None if p99 is None else p99 * 2)
    return WindowFigures(kind, f"{kind} window", "2026-01-01T00:00:05+00:00",
                         "2026-01-01T00:00:34+00:00", lag, not_started)


def result(kill_p99: float | None, added_p99: float | None,
           not_started: int = 0) -> FailoverResult:
    moved = takeover("kill -9", 100.0, 3, 110.5, 111.0, [110.2, 110.3, 110.4],
                     [LoggedTake(111.0, "s1", (0, 3), 0.4), LoggedTake(111.0, "s2", (5,), 0.6)])
    return FailoverResult(
        "cronlog", 1000, 8, 3, 2.0, 10.0, "t", "k", "a", "scheduler-2",
        [window("baseline", 30.0), window("kill", kill_p99, not_started),
         window("added", added_p99)],
        moved, None,
        Audit(1000, 155_000, 155_000, 0, {"duplicate fire times": 0,
                                          "missing fire times": 0}), "test")


def test_the_target_is_p99_within_two_seconds_and_every_run_started() -> None:
    assert window("kill", 2000.0).met and not window("kill", 2001.0).met
    assert not window("kill", 100.0, not_started=1).met
    assert not window("kill", None).met
    text = verdict(result(11_000.0, 800.0))
    assert "kill -9: p99 11,000 ms, max 22,000 ms: MISSED" in text
    assert "added scheduler: p99 800 ms, max 1,600 ms: met" in text
    assert "1 not started" in verdict(result(100.0, 100.0, not_started=1))
    assert "added scheduler: not measured" in verdict(result(100.0, None))


def test_the_tables_show_windows_takeovers_and_audit_and_the_json_keeps_them() -> None:
    r = result(11_000.0, 800.0)
    text = render_failover(r)
    assert "| kill window | 1,000 | 10 | 11,000 | 22,000 | 0 | 0 | NO |" in text
    assert "| baseline window | 1,000 | 10 | 30 | 60 | 0 | 0 | - |" in text
    # From the kill: first new epoch after 10.2 s, all caught up after 11 s.
    assert "| killed scheduler's, from the kill | 3 | 10.20 | 11.00 | 0.60 |" in text
    assert "| to the added scheduler, from its start | - |" in text
    assert "155,000 of 155,000 fire times" in text and "duplicate fire times 0" in text
    table = render_table(rows({"failover": {"cronlog": r}}))
    assert "failover kill: start lag p99 ms" in table and "11,000" in table
    assert "failover: fire times doubled / missed" in table and "0 / 0" in table
    doc = json.loads(json.dumps(to_jsonable({"failover": {"cronlog": r}})))
    assert doc["failover"]["cronlog"]["windows"][1]["lag"]["p99_ms"] == 11_000.0
    assert doc["failover"]["cronlog"]["kill_takeover"]["seconds_to_caught_up"] == 11.0


def test_failover_is_asked_for_by_name_with_its_rate_and_window() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    default = from_namespace(parser.parse_args([]))
    assert "failover" not in default.workloads
    assert (default.failover_rate, default.failover_window) == (3500, 30)
    asked = from_namespace(parser.parse_args(["--workloads", "failover", "--failover-rate",
                                              "1200", "--failover-window", "20"]))
    assert asked.workloads == ("failover",)
    assert (asked.failover_rate, asked.failover_window) == (1200, 20)
    with pytest.raises(SystemExit):
        parser.parse_args(["--failover-rate", "0"])


def test_the_seconds_over_target_count_each_late_fire_time_second_once() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def run(fire_s: float, lag_s: float | None) -> RunStart:
        fire = t0 + timedelta(seconds=fire_s)
        return RunStart(f"r{fire_s}-{lag_s}", fire,
                        None if lag_s is None else fire + timedelta(seconds=lag_s))

    starts = [run(0, 0.1), run(1, 2.5), run(1, 3.0), run(2, 2.0), run(3, None),
              run(10, 9.0)]
    # Second 1 twice late, second 2 exactly at the bound, second 3 never started; second 10
    # is outside.
    assert seconds_over_target(starts, t0, t0 + timedelta(seconds=5)) == 2
    assert seconds_over_target(starts, t0, t0 + timedelta(seconds=10)) == 3
    assert seconds_over_target(starts, t0, t0 + timedelta(seconds=5), bound_ms=100) == 3


def test_the_baseline_cpu_per_role_is_shown_and_kept() -> None:
    r = result(100.0, 100.0)
    r.cpu = RoleCpu(runs=45_000, window_seconds=30.0, core_seconds={"scheduler": 9.0},
                    per_1k_runs={"scheduler": 0.2, "worker": 0.1, "kafka": 0.05}, source="t")
    text = render_failover(r)
    assert ("CPU s per 1,000 runs over the baseline (45,000 runs in 30 s): kafka 0.050, "
            "scheduler 0.200, worker 0.100; all 0.350") in text
    labels = {row.label: row.ours for row in rows({"failover": {"cronlog": r}})}
    assert labels["failover baseline: CPU s per 1k runs, scheduler"] == 0.2
    assert labels["failover baseline: CPU s per 1k runs, all roles"] == 0.35
    doc = json.loads(json.dumps(to_jsonable({"failover": {"cronlog": r}})))
    assert doc["failover"]["cronlog"]["cpu"]["per_1k_runs"]["worker"] == 0.1
