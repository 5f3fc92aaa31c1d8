"""The failover-lag figures from made-up logs: which runs count, where, and with what lag."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.chaos.start_lag import (
    RunStart,
    Window,
    lag_table,
    lags_by_kind,
    run_starts,
    window_lags,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def scheduled(run_id: str, fire_s: float, trigger: str = "schedule") -> tuple[str, dict[str, object]]:
    return ("RunScheduled", {"run_id": run_id, "job_id": "j", "scheduled_at": at(fire_s),
                             "trigger": trigger})


def started(run_id: str, attempt: int, start_s: float) -> tuple[str, dict[str, object]]:
    return ("AttemptStarted", {"run_id": run_id, "attempt": attempt, "started_at": at(start_s)})


def test_the_lag_is_the_first_start_of_any_attempt_after_the_fire_time() -> None:
    events = [
        scheduled("a", 10), started("a", 1, 10.25),
        # A start reported twice (at-least-once) and a retry: the earliest start counts.
        scheduled("b", 11), started("b", 2, 14.0), started("b", 1, 12.5), started("b", 1, 12.5),
        # A manual run has no fire time to be late for.
        scheduled("m", 11, trigger="manual"), started("m", 1, 30),
        scheduled("never", 12),
    ]
    starts = {s.run_id: s for s in run_starts(events)}
    assert set(starts) == {"a", "b", "never"}
    assert starts["a"].lag_us == 250_000
    assert starts["b"].lag_us == 1_500_000
    assert starts["never"].lag_us is None


def test_a_lag_spanning_days_and_an_early_start_keep_their_size_and_sign() -> None:
    assert RunStart("r", at(0), at(86_400 + 2)).lag_us == 86_402_000_000
    assert RunStart("r", at(10), at(9.5)).lag_us == -500_000


def test_each_window_counts_the_runs_due_from_its_start_up_to_its_end() -> None:
    starts = [RunStart(f"r{s}", at(s), at(s + lag))
              for s, lag in ((0, 0.1), (4.999, 0.2), (5, 3.0), (6, 1.0), (9, 0.5))]
    starts.append(RunStart("late", at(7), None))
    windows = [Window("baseline", "before", at(0), at(5)),
               Window("kill", "kill -9", at(5), at(10))]
    before, kill = window_lags(starts, windows)
    assert (before.lag.count, before.lag.p50_ms, before.lag.max_ms) == (2, 100, 200)
    assert before.not_started == 0
    assert (kill.lag.count, kill.lag.p50_ms, kill.lag.p99_ms, kill.lag.max_ms) == (
        3, 1000, 3000, 3000)
    assert kill.not_started == 1


def test_a_window_is_within_a_bound_only_if_every_run_started_within_it() -> None:
    starts = [RunStart(f"r{i}", at(i), at(i + 0.01 * i)) for i in range(100)]
    starts.append(RunStart("slow", at(50), at(53)))  # the one run past the p99
    [row] = window_lags(starts, [Window("sigterm", "SIGTERM", at(0), at(100))])
    assert row.within(2_000)
    assert not row.within(2_000, "max")
    assert not row.within(900)
    [empty] = window_lags(starts, [Window("added", "added", at(200), at(210))])
    assert not empty.within(2_000), "a window with no runs proves nothing"
    unstarted = [*starts, RunStart("never", at(1), None)]
    [partial] = window_lags(unstarted, [Window("sigterm", "SIGTERM", at(0), at(100))])
    assert not partial.within(2_000)


def test_windows_of_one_kind_are_summed_over_rounds() -> None:
    starts = [RunStart("a", at(1), at(1.5)), RunStart("b", at(11), at(14)),
              RunStart("c", at(6), at(6.1))]
    windows = [Window("sigterm", "round 1", at(0), at(5)),
               Window("freeze", "round 1", at(5), at(10)),
               Window("sigterm", "round 2", at(10), at(15))]
    sigterm, freeze = lags_by_kind(starts, windows)
    assert (sigterm.kind, sigterm.lag.count, sigterm.lag.max_ms) == ("sigterm", 2, 3000)
    assert sigterm.label == "all sigterm windows (2)"
    assert (freeze.kind, freeze.lag.count) == ("freeze", 1)


def test_the_table_has_a_line_per_window_and_a_dash_for_an_empty_one() -> None:
    starts = [RunStart("a", at(1), at(2.2345))]
    rows = window_lags(starts, [Window("baseline", "baseline", at(0), at(5)),
                                Window("added", "scheduler-4 added", at(5), at(9))])
    table = lag_table(rows).splitlines()
    assert len(table) == 3
    assert table[1].split() == ["baseline", "1", "1,234", "1,234", "1,234", "0"]
    assert table[2].split()[-5:] == ["0", "-", "-", "-", "0"]


@pytest.mark.parametrize("figure", ["p99", "max"])
def test_a_window_without_runs_has_no_figure(figure: str) -> None:
    [row] = window_lags([], [Window("kill", "kill", at(0), at(1))])
    assert row.lag.count == 0
    assert not row.within(10**9, figure)
