"""Start-lag percentiles and the figures of each workload, from plain numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

_US = 1_000_000


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile (q in 0..100) of values sorted ascending.

    Nearest rank, not interpolation: the figure is always a lag some run really had.
    """
    if not sorted_values:
        raise ValueError("no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class LagSummary:
    count: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None


def summarise_lags(lags_us: Sequence[int]) -> LagSummary:
    if not lags_us:
        return LagSummary(0, None, None, None)
    ordered = sorted(lags_us)
    return LagSummary(len(ordered), percentile(ordered, 50) / 1000,
                      percentile(ordered, 99) / 1000, ordered[-1] / 1000)


@dataclass(frozen=True)
class Start:
    """One run's first attempt: when it was due and when a worker started it (µs epoch)."""

    due_us: int
    started_us: int
    # When its owner dispatched it (0: not known, as for pgqueuer).
    dispatched_us: int = 0

    @property
    def lag_us(self) -> int:
        return self.started_us - self.due_us


def late_starts_note(starts: Sequence[Start], late_ms: int = 500) -> str | None:
    """Where the lag of the late starts came from, as far as the history tells: a run its
    owner stamped after its due time was late before any worker saw it. One stamped in time
    may still have reached its worker late (the stamp is the owner's cycle start, not when
    its transaction committed): the worker's log says which (commands/start_lateness.py)."""
    late = [s for s in starts if s.lag_us > late_ms * 1000]
    if not late:
        return None
    owner_late = sum(1 for s in late if s.dispatched_us > s.due_us)
    return (f"{len(late):,} runs started more than {late_ms} ms late: {owner_late:,} of them "
            f"dispatched by their owner after their due time, {len(late) - owner_late:,} "
            "stamped in time by their owner (the workers' logs say whether those reached them "
            "late)")


@dataclass(frozen=True)
class BurstFigures:
    expected: int
    started: int
    # From the burst second T until the last run started; None while some never started.
    seconds_to_last_start: float | None
    # Runs started by the deadline per second from T to the last of them.
    dispatches_per_second: float | None
    lag: LagSummary


def burst_figures(due_us: int, expected: int, starts: Sequence[Start],
                  deadline_us: int) -> BurstFigures:
    """Runs started after the deadline do not count: the workload reports what it reached
    within its time cap, whatever the history shows later."""
    within = [s for s in starts if s.started_us <= deadline_us]
    lag = summarise_lags([s.lag_us for s in within])
    if not within:
        return BurstFigures(expected, 0, None, None, lag)
    span_us = max(s.started_us for s in within) - due_us
    complete = len(within) >= expected
    rate = len(within) / (span_us / _US) if span_us > 0 else None
    return BurstFigures(expected, len(within), span_us / _US if complete else None, rate, lag)


@dataclass(frozen=True)
class SteadyFigures:
    target_rate: float
    seconds: int
    due: int
    # Runs due in the window that started by the deadline.
    started: int
    # Starts that happened inside the window, per second of the window: the rate the system
    # kept up while the load was on, whatever was due.
    achieved_per_second: float
    lag: LagSummary
    # p99 start lag of the runs due in each second of the window (None: none started):
    # whether the tail comes from the window's first seconds or from all along.
    p99_ms_by_second: tuple[float | None, ...] = ()


def steady_figures(target_rate: float, window_start_us: int, seconds: int, due: int,
                   starts: Sequence[Start], deadline_us: int) -> SteadyFigures:
    window_end_us = window_start_us + seconds * _US
    in_window = [s for s in starts if window_start_us <= s.due_us < window_end_us]
    started = [s for s in in_window if s.started_us <= deadline_us]
    during = sum(1 for s in starts if window_start_us <= s.started_us < window_end_us)
    by_second: list[list[int]] = [[] for _ in range(seconds)]
    for s in started:
        by_second[(s.due_us - window_start_us) // _US].append(s.lag_us)
    return SteadyFigures(target_rate, seconds, due, len(started), during / seconds,
                         summarise_lags([s.lag_us for s in started]),
                         tuple(summarise_lags(lags).p99_ms for lags in by_second))
