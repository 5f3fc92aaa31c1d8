"""The metrics-cost workload's figures, from plain numbers: the CPU the scheduler and worker
processes spent per 1,000 runs of the steady workload with their /metrics served and scraped
and without, and the difference in percent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cronlog_dev.bench.rss import RssPeak

# The roles whose cost issue 17 bounds, then the one kept beside them in the JSON only: the
# projector runs at a lower CPU priority and trails the window by as much as the machine
# lets it, so its CPU inside the window says how far it got, not what the runs cost it.
COMPARED = ("scheduler", "worker")
ROLES = (*COMPARED, "projector")


def role_of(process: str) -> str:
    """The role of a bench process name: "cronlog-scheduler-2" and "scheduler" are both
    "scheduler"."""
    name = process.removeprefix("cronlog-")
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


def by_role(core_seconds: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds of each process summed by role (two schedulers are one figure)."""
    out: dict[str, float] = {}
    for process, seconds in core_seconds.items():
        role = role_of(process)
        out[role] = out.get(role, 0.0) + seconds
    return {role: round(seconds, 3) for role, seconds in out.items()}


def cpu_used(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds each process used between two readings of its user + system time; a
    process missing from either reading is left out rather than counted as zero."""
    return {p: max(0.0, after[p] - before[p]) for p in before if p in after}


def per_thousand(core_seconds: float | None, runs: int) -> float | None:
    if core_seconds is None or runs <= 0:
        return None
    return round(core_seconds / runs * 1000, 4)


def difference_percent(off: float | None, on: float | None) -> float | None:
    """How much more (positive) or less the figure with metrics is, in percent of without."""
    if off is None or on is None or off == 0:
        return None
    return round((on - off) / off * 100, 1)


@dataclass
class MetricsCostRun:
    """One steady run, with its roles serving /metrics (and scraped) or not."""

    pair: int
    metrics: bool
    due: int
    # Runs due in the window that started by the workload's deadline.
    runs: int
    # The measurement window: from the lookahead before the first fire time (plus a second)
    # to a fixed tail after the last, the same length with metrics and without.
    window_seconds: float
    # user + system CPU seconds over the window, summed by role.
    core_seconds: dict[str, float]
    start_lag_p99_ms: float | None
    scrapes_ok: int = 0
    scrapes_failed: int = 0
    # Every due run started before the window closed: otherwise part of their work fell
    # outside it, the figure is low, and the run is left out of the pooled difference.
    complete: bool = True
    notes: list[str] = field(default_factory=list)

    def per_thousand(self, role: str) -> float | None:
        return per_thousand(self.core_seconds.get(role), self.runs)


@dataclass
class Difference:
    """With metrics against without, per role: CPU seconds per 1,000 runs and percent."""

    label: str
    off: dict[str, float | None]
    on: dict[str, float | None]
    percent: dict[str, float | None]


def _difference(label: str, offs: Sequence[MetricsCostRun],
                ons: Sequence[MetricsCostRun]) -> Difference:
    # Pooled: all CPU over all runs of each side, so a shorter run weighs less.
    def pooled(side: Sequence[MetricsCostRun], role: str) -> float | None:
        runs = sum(r.runs for r in side)
        if not side or any(role not in r.core_seconds for r in side):
            return None
        return per_thousand(sum(r.core_seconds[role] for r in side), runs)

    off = {role: pooled(offs, role) for role in ROLES}
    on = {role: pooled(ons, role) for role in ROLES}
    return Difference(label, off, on,
                      {role: difference_percent(off[role], on[role]) for role in ROLES})


def differences(runs: Sequence[MetricsCostRun]) -> list[Difference]:
    """Each pair's difference, then the complete pairs pooled (when there are several)."""
    pairs = sorted({r.pair for r in runs})
    complete = [p for p in pairs if all(r.complete for r in runs if r.pair == p)]
    out = [_difference(f"pair {p}" if p in complete else f"pair {p} (incomplete)",
                       [r for r in runs if r.pair == p and not r.metrics],
                       [r for r in runs if r.pair == p and r.metrics]) for p in pairs]
    if len(complete) > 1:
        label = "all pairs" if len(complete) == len(pairs) else "complete pairs"
        out.append(_difference(label, [r for r in runs if r.pair in complete and not r.metrics],
                               [r for r in runs if r.pair in complete and r.metrics]))
    return out


@dataclass
class MetricsCostResult:
    system: str
    rate: int
    seconds: int
    scrape_interval_seconds: float
    runs: list[MetricsCostRun]
    differences: list[Difference]
    source: str
    rss: dict[str, RssPeak] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _cell(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.1f} %" if percent else f"{value:.3f}"


def render_metrics_cost(result: MetricsCostResult) -> str:
    header = ("run", "metrics", "runs started", "window s", "p99 lag ms",
              *(f"{role} CPU s / 1k runs" for role in COMPARED), "scrapes ok/failed")
    body: list[tuple[str, ...]] = []
    for run in result.runs:
        body.append((f"pair {run.pair}", "on" if run.metrics else "off",
                     f"{run.runs:,}/{run.due:,}" + ("" if run.complete else " late"),
                     f"{run.window_seconds:.0f}",
                     "-" if run.start_lag_p99_ms is None else f"{run.start_lag_p99_ms:,.0f}",
                     *(_cell(run.per_thousand(role)) for role in COMPARED),
                     f"{run.scrapes_ok}/{run.scrapes_failed}" if run.metrics else "-"))
    for diff in result.differences:
        body.append((diff.label, "on vs off", "", "", "",
                     *(_cell(diff.percent[role], percent=True) for role in COMPARED), ""))
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i])
                                 for i, c in enumerate(cells)) + " |"

    rule = "|" + "|".join("-" * (w + 2) if i < 2 else "-" * (w + 1) + ":"
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(b) for b in body)])
