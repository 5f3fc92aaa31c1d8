from __future__ import annotations

import pytest

from cronlog_dev.bench.stats import (
    Start,
    burst_figures,
    late_starts_note,
    percentile,
    steady_figures,
    summarise_lags,
)
from cronlog_dev.bench.timing import plan_due

S = 1_000_000


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1
    assert percentile([7], 99) == 7
    assert percentile([1, 2], 50) == 1


def test_percentile_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_summary_in_milliseconds() -> None:
    summary = summarise_lags([3000, 1000, 2000])
    assert (summary.count, summary.p50_ms, summary.max_ms) == (3, 2.0, 3.0)
    assert summarise_lags([]).p99_ms is None


def test_burst_counts_only_starts_by_the_deadline() -> None:
    due = 100 * S
    starts = [Start(due, due + 1 * S), Start(due, due + 2 * S), Start(due, due + 50 * S)]
    figures = burst_figures(due, 3, starts, deadline_us=due + 10 * S)
    assert figures.started == 2
    assert figures.seconds_to_last_start is None  # one never started within the cap
    assert figures.dispatches_per_second == 1.0
    assert figures.lag.max_ms == 2000.0


def test_burst_complete() -> None:
    due = 100 * S
    starts = [Start(due, due + S // 2), Start(due, due + 4 * S)]
    figures = burst_figures(due, 2, starts, deadline_us=due + 10 * S)
    assert figures.seconds_to_last_start == 4.0
    assert figures.dispatches_per_second == 0.5


def test_steady_rate_counts_starts_inside_the_window() -> None:
    start = 1000 * S
    starts = [Start(start + i * S, start + i * S + S // 10) for i in range(10)]
    starts.append(Start(start + 9 * S, start + 30 * S))  # late: after the window
    figures = steady_figures(1.0, start, 10, due=11, starts=starts, deadline_us=start + 60 * S)
    assert figures.started == 11
    assert figures.achieved_per_second == 1.0
    assert figures.lag.p50_ms == 100.0
    assert figures.lag.max_ms == 21_000.0
    # Second 9 had a run 21 s late; the others all started 100 ms after their time.
    assert figures.p99_ms_by_second == (100.0,) * 9 + (21_000.0,)


def test_a_second_whose_runs_never_started_has_no_p99() -> None:
    start = 1000 * S
    starts = [Start(start, start + S // 2), Start(start + 2 * S, start + 3 * S)]
    figures = steady_figures(1.0, start, 3, due=3, starts=starts, deadline_us=start + 60 * S)
    assert figures.p99_ms_by_second == (500.0, None, 1000.0)


def test_plan_due_leaves_room_for_creation() -> None:
    assert plan_due(1000.2, 1000, 100.0, 10, 900) == 1026.0  # 10 s * 1.5 + 10 s lead
    assert plan_due(1000.0, 10, 1000.0, 10, 900) == 1011.0
    assert plan_due(1000.0, 10**6, 1.0, 10, 900) == 1900.0
    assert plan_due(1000.0, 10, 0.0, 10, 60) == 1060.0


def test_late_starts_are_told_apart_by_when_their_owner_dispatched_them() -> None:
    due = 10 * S
    starts = [Start(due, due + 100_000, due - 2 * S),        # in time
              Start(due, due + 900_000, due - 2 * S),        # stamped in time, late
              Start(due, due + 1_200_000, due + 1_000_000),    # dispatched late
              Start(due, due + 700_000, due + 600_000)]        # dispatched late
    assert late_starts_note(starts) == (
        "3 runs started more than 500 ms late: 2 of them dispatched by their owner after "
        "their due time, 1 stamped in time by their owner (the workers' logs say whether "
        "those reached them late)")
    assert late_starts_note(starts[:1]) is None
