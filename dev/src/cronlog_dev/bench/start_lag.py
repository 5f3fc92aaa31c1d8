"""Start lag of every run, read from the committed event log, and its figures for each
window of a fault timeline. Pure: events and windows in, numbers and text out. Shared by
the chaos tests and the bench's failover workload."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronlog.domain.catalogue import Report
from cronlog_dev.bench.stats import LagSummary, summarise_lags


@dataclass(frozen=True)
class RunStart:
    """A scheduled run: its fire time and the first time any of its attempts started."""

    run_id: str
    scheduled_at: datetime
    started_at: datetime | None  # None: no attempt has started (yet)

    @property
    def lag_us(self) -> int | None:
        if self.started_at is None:
            return None
        delta = self.started_at - self.scheduled_at
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def run_starts(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[RunStart]:
    """One entry per scheduled run. The lag is the first start of any attempt: when the
    first attempt was lost unstarted, its retry's start is when the run really began."""
    fire_times: dict[str, datetime] = {}
    first_start: dict[str, datetime] = {}
    for name, record in events:
        run_id = str(record.get("run_id"))
        # Manual runs and backfills start when asked, not at a fire time: no lag to measure.
        if name == "RunScheduled" and record.get("trigger", "schedule") == "schedule":
            fire_times[run_id] = record["scheduled_at"]
        elif name == "AttemptStarted" or record.get("started_at") is not None:
            # An AttemptSucceeded with started_at stands for its AttemptStarted too.
            started: datetime = record["started_at"]
            if run_id not in first_start or started < first_start[run_id]:
                first_start[run_id] = started
    return [RunStart(run_id, at, first_start.get(run_id)) for run_id, at in fire_times.items()]


@dataclass(frozen=True)
class Window:
    """Runs due from `start` (inclusive) to `end` (exclusive), around one timeline event."""

    kind: str  # what happened: baseline, sigterm, added, kill, freeze
    label: str
    start: datetime
    end: datetime


@dataclass(frozen=True)
class WindowLag:
    label: str
    kind: str
    lag: LagSummary
    not_started: int

    def within(self, bound_ms: float, figure: str = "p99") -> bool:
        """Whether the figure is at most bound_ms; a window with runs not started is not."""
        value = self.lag.p99_ms if figure == "p99" else self.lag.max_ms
        return self.not_started == 0 and value is not None and value <= bound_ms


def window_lags(starts: Sequence[RunStart], windows: Sequence[Window]) -> list[WindowLag]:
    """The lag figures of the runs due in each window, in the windows' order."""
    rows = []
    for window in windows:
        due = [s for s in starts if window.start <= s.scheduled_at < window.end]
        lags = [lag for s in due if (lag := s.lag_us) is not None]
        rows.append(WindowLag(window.label, window.kind, summarise_lags(lags),
                              len(due) - len(lags)))
    return rows


def lags_by_kind(starts: Sequence[RunStart], windows: Sequence[Window]) -> list[WindowLag]:
    """One row per kind of event, over all its windows (a long soak repeats each event)."""
    kinds = list(dict.fromkeys(w.kind for w in windows))
    rows = []
    for kind in kinds:
        mine = [w for w in windows if w.kind == kind]
        due = [s for s in starts if any(w.start <= s.scheduled_at < w.end for w in mine)]
        lags = [lag for s in due if (lag := s.lag_us) is not None]
        rows.append(WindowLag(f"all {kind} windows ({len(mine)})", kind,
                              summarise_lags(lags), len(due) - len(lags)))
    return rows


def lag_table(rows: Sequence[WindowLag]) -> str:
    """A fixed-width table: one line per row, lags in milliseconds."""
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    width = max([len(r.label) for r in rows] + [6])
    lines = [f"{'window':<{width}}  {'runs':>6}  {'p50 ms':>8}  {'p99 ms':>8}  "
             f"{'max ms':>8}  {'not started':>11}"]
    for r in rows:
        lines.append(f"{r.label:<{width}}  {r.lag.count:>6}  {ms(r.lag.p50_ms):>8}  "
                     f"{ms(r.lag.p99_ms):>8}  {ms(r.lag.max_ms):>8}  {r.not_started:>11}")
    return "\n".join(lines)


class ReportedStarts:
    """The first start the workers reported for each of a set of runs, from the start
    reports on the inbox (one by one, or gathered in WorkerReports messages): when each run
    began, whether or not its owner has recorded the start in the run events yet. The scale
    workload reads its burst with it: at 1,024 partitions the owners fell minutes behind on
    reports, so the run events held only the starts they had got to."""

    def __init__(self, runs: Iterable[str]) -> None:
        self._runs = frozenset(runs)
        self._first_start: dict[str, datetime] = {}

    def feed(self, name: str, record: Mapping[str, Any]) -> None:
        if name == Report.ATTEMPT_STARTED:
            self._started(record)
        elif name == Report.WORKER_REPORTS:
            for item in record.get("started") or ():
                self._started(item)
            for item in record.get("finished") or ():
                if item.get("started_at") is not None:  # v2: its start came with its end
                    self._started(item)

    def _started(self, report: Mapping[str, Any]) -> None:
        run_id = str(report.get("run_id"))
        if run_id not in self._runs:
            return
        started: datetime = report["started_at"]
        if run_id not in self._first_start or started < self._first_start[run_id]:
            self._first_start[run_id] = started

    @property
    def expected(self) -> int:
        return len(self._runs)

    @property
    def started(self) -> int:
        return len(self._first_start)

    def first_starts(self) -> list[datetime]:
        return list(self._first_start.values())
