from __future__ import annotations

from datetime import timedelta

import pytest

from cronlog_dev.bench.pgq_scale import (
    BACKGROUND_FROM,
    BACKGROUND_SPAN,
    DEQUEUE_INDEXES,
    background_delays,
    batches,
    burst_notes,
    index_reads_note,
    mebibytes,
    scale_result,
)
from cronlog_dev.bench.stats import BurstFigures, Start, burst_figures

S = 1_000_000
MIB = 1024 * 1024


def test_batches_cover_the_total_with_a_short_last_one() -> None:
    assert list(batches(25_000, 10_000)) == [10_000, 10_000, 5_000]
    assert list(batches(20_000, 10_000)) == [10_000, 10_000]
    assert list(batches(3, 10_000)) == [3]
    assert list(batches(0, 10_000)) == []


def test_batches_refuse_a_size_that_would_never_end() -> None:
    with pytest.raises(ValueError, match="batch size"):
        list(batches(10, 0))


def test_background_rows_spread_over_a_day_from_an_hour_ahead() -> None:
    total = 1_000
    delays = [d for first in range(0, total, 300)
              for d in background_delays(first, min(300, total - first), total)]
    assert len(delays) == total
    assert delays[0] == BACKGROUND_FROM
    assert delays == sorted(delays)
    assert len(set(delays)) == total
    # The last one is due a step short of a day after the first: nothing falls due while
    # the workload runs, and none lies beyond the span.
    assert BACKGROUND_FROM + BACKGROUND_SPAN - delays[-1] == BACKGROUND_SPAN / total
    assert min(delays) >= timedelta(hours=1)


def test_batched_delays_match_the_whole_set() -> None:
    whole = background_delays(0, 10, 10)
    assert background_delays(4, 3, 10) == whole[4:7]


def test_mebibytes() -> None:
    assert mebibytes(512 * MIB) == 512.0
    assert mebibytes(3 * MIB // 2) == 1.5


def _figures(lags_s: list[float], expected: int, cap_s: float = 120.0) -> BurstFigures:
    due = 1_000 * S
    starts = [Start(due, due + int(lag * S)) for lag in lags_s]
    return burst_figures(due, expected, starts, due + int(cap_s * S))


def test_scale_result_carries_the_burst_figures_and_both_tables() -> None:
    figures = _figures([0.5, 1.0, 2.0, 4.0], expected=4)
    result = scale_result(1_000_000, 20.0, 300 * MIB, 100 * MIB, figures, ["burst note"])
    assert result.rows_enqueued == 1_000_000
    assert result.enqueue_per_second == 50_000.0
    assert result.table_mb == 400.0
    assert (result.burst_jobs, result.burst_started) == (4, 4)
    assert (result.lag_p50_ms, result.lag_max_ms) == (1000.0, 4000.0)
    assert result.lag_p99_ms == 4000.0
    assert result.burst_all_started_seconds == 4.0
    assert "pgqueuer 300.0 MB + pgqueuer_log 100.0 MB" in result.notes[0]
    assert result.notes[1:] == ["burst note"]


def test_a_burst_not_all_started_has_no_time_to_the_last_start() -> None:
    figures = _figures([1.0, 200.0], expected=3)
    result = scale_result(10, 1.0, MIB, MIB, figures, [])
    assert result.burst_started == 1
    assert result.burst_all_started_seconds is None
    notes = burst_notes(figures, 120.0, enqueue_ended_after_t=False, burst_enqueue_seconds=2.0)
    assert any("1 of 3 started within 120 s of T" in n for n in notes)
    assert not any("after T" in n for n in notes)


def test_a_burst_enqueued_too_late_says_so() -> None:
    figures = _figures([1.0], expected=1)
    notes = burst_notes(figures, 120.0, enqueue_ended_after_t=True, burst_enqueue_seconds=31.0)
    assert notes[0] == "the burst's 1 jobs went in in 31.0 s"
    assert any("ended after T" in n for n in notes)
    assert not any("started within" in n for n in notes)


def test_no_enqueue_time_gives_no_rate_rather_than_a_division_by_zero() -> None:
    result = scale_result(0, 0.0, 0, 0, _figures([], expected=0), [])
    assert result.enqueue_per_second == 0.0


def test_index_reads_name_both_dequeue_indexes_even_one_never_used() -> None:
    by_priority, by_due = DEQUEUE_INDEXES
    note = index_reads_note({by_due: (10, 700_000)})
    assert f"{by_due} 10 scans, 700,000 entries read, 70,000 a scan" in note
    assert f"{by_priority} 0 scans, 0 entries read" in note
    assert note.index(by_priority) < note.index(by_due)
