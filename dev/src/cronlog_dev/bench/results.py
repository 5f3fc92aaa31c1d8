"""What each workload reports, the side-by-side table and the JSON file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cronlog_dev.bench.failover_figures import FailoverResult
from cronlog_dev.bench.metrics_cost_figures import MetricsCostResult
from cronlog_dev.bench.partitions_figures import PartitionsResult
from cronlog_dev.bench.role_cpu import RoleCpu
from cronlog_dev.bench.rss import RssPeak
from cronlog_dev.bench.stats import BurstFigures, SteadyFigures
from cronlog_dev.bench.takeover_figures import Takeover


@dataclass
class Creation:
    jobs: int
    # Jobs the system had in place before they were due.
    in_place: int
    seconds: float | None
    per_second: float | None
    # Seconds between starting to create and the due time that was planned from a warm-up.
    lead_seconds: float


@dataclass
class BurstResult:
    system: str
    due_at: str
    max_wait: float
    creation: Creation
    figures: BurstFigures
    lag_source: str
    rss: dict[str, RssPeak] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class SteadyResult:
    system: str
    window_start: str
    max_wait: float
    creation: Creation
    figures: SteadyFigures
    lag_source: str
    rss: dict[str, RssPeak] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # CPU core-seconds of each role over the window, and per 1,000 of its runs (issue 19).
    cpu: RoleCpu | None = None


@dataclass
class TakeoverRun:
    """The takeovers measured at one partition count."""

    partitions: int
    jobs: int
    # Jobs the seeding scheduler had decided (in the log and the projection) before.
    jobs_in_log: int
    # How long the group takes to notice a killed scheduler: part of the SIGKILL figures.
    session_timeout_seconds: float
    cold_start: Takeover | None
    sigterm: Takeover | None
    sigkill: Takeover | None
    verdict: str
    notes: list[str] = field(default_factory=list)


@dataclass
class TakeoverResult:
    system: str
    runs: list[TakeoverRun]
    source: str
    rss: dict[str, RssPeak] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


Result = (BurstResult | SteadyResult | TakeoverResult | MetricsCostResult | FailoverResult
          | PartitionsResult)


@dataclass(frozen=True)
class Row:
    label: str
    ours: float | None
    theirs: float | None
    # Written in the table as "x/y" when both sides have a count and an out-of.
    ours_text: str | None = None
    theirs_text: str | None = None


def total_rss(rss: Mapping[str, RssPeak]) -> float | None:
    return round(sum(p.sampled_mib for p in rss.values()), 1) if rss else None


R = TypeVar("R", BurstResult, SteadyResult)


def _row(label: str, ours: R | None, theirs: R | None,
         figure: Callable[[R], float | None]) -> Row:
    return Row(label, None if ours is None else figure(ours),
               None if theirs is None else figure(theirs))


def _started_row(label: str, ours: R | None, theirs: R | None,
                 out_of: Callable[[R], int]) -> Row:
    """A count shown as "started/out of" on each side."""
    def text(r: R | None) -> str | None:
        return None if r is None else f"{r.figures.started}/{out_of(r)}"

    row = _row(label, ours, theirs, lambda r: r.figures.started)
    return Row(row.label, row.ours, row.theirs, text(ours), text(theirs))


def _burst_rows(ours: BurstResult | None, theirs: BurstResult | None) -> list[Row]:
    return [
        _started_row("burst: runs started by the cap", ours, theirs,
                     lambda r: r.figures.expected),
        _row("burst: s from T to last start", ours, theirs,
             lambda r: r.figures.seconds_to_last_start),
        _row("burst: dispatches/s", ours, theirs, lambda r: r.figures.dispatches_per_second),
        _row("burst: start lag p50 ms", ours, theirs, lambda r: r.figures.lag.p50_ms),
        _row("burst: start lag p99 ms", ours, theirs, lambda r: r.figures.lag.p99_ms),
        _row("burst: start lag max ms", ours, theirs, lambda r: r.figures.lag.max_ms),
        _row("burst: jobs created/s", ours, theirs, lambda r: r.creation.per_second),
        _row("burst: peak RSS MiB (all processes)", ours, theirs, lambda r: total_rss(r.rss)),
    ]


def _steady_rows(ours: SteadyResult | None, theirs: SteadyResult | None) -> list[Row]:
    return [
        _row("steady: target runs/s", ours, theirs, lambda r: r.figures.target_rate),
        _row("steady: achieved runs/s", ours, theirs, lambda r: r.figures.achieved_per_second),
        _started_row("steady: due runs started by the cap", ours, theirs,
                     lambda r: r.figures.due),
        _row("steady: start lag p50 ms", ours, theirs, lambda r: r.figures.lag.p50_ms),
        _row("steady: start lag p99 ms", ours, theirs, lambda r: r.figures.lag.p99_ms),
        _row("steady: p99 ms of the worst second", ours, theirs,
             lambda r: max((p for p in r.figures.p99_ms_by_second if p is not None),
                           default=None)),
        _row("steady: p99 ms of the median second", ours, theirs,
             lambda r: _median(r.figures.p99_ms_by_second)),
        _row("steady: peak RSS MiB (all processes)", ours, theirs, lambda r: total_rss(r.rss)),
        *_cpu_rows(ours, theirs),
    ]


# The roles in the order of the table; a role neither side measured has no row.
CPU_ROLES = ("scheduler", "worker", "projector", "kafka", "postgres", "clickhouse")


def _cpu_rows(ours: SteadyResult | None, theirs: SteadyResult | None) -> list[Row]:
    def figure(r: SteadyResult | None, role: str) -> float | None:
        return None if r is None or r.cpu is None else r.cpu.per_1k_runs.get(role)

    def total(r: SteadyResult | None) -> float | None:
        if r is None or r.cpu is None or not r.cpu.per_1k_runs:
            return None
        return round(sum(r.cpu.per_1k_runs.values()), 3)

    out = [Row(f"steady: CPU s per 1k runs, {role}", figure(ours, role), figure(theirs, role))
           for role in CPU_ROLES
           if figure(ours, role) is not None or figure(theirs, role) is not None]
    if out:
        out.append(Row("steady: CPU s per 1k runs, all roles", total(ours), total(theirs)))
    return out


def _median(values: Sequence[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    return present[(len(present) - 1) // 2] if present else None


def _takeover_rows(ours: TakeoverResult) -> list[Row]:
    """cronlog's figures only: pgqueuer has no partitions to take."""
    out: list[Row] = []
    for run in ours.runs:
        at = f"takeover {run.partitions:,}p"
        if run.cold_start is not None:
            out += [Row(f"{at}: cold start, all partitions s", run.cold_start.seconds_to_caught_up,
                        None),
                    Row(f"{at}: cold start ms per partition", run.cold_start.ms_per_partition,
                        None),
                    Row(f"{at}: cold start logged take s",
                        run.cold_start.longest_logged_take, None)]
        if run.sigterm is not None:
            out += [Row(f"{at}: SIGTERM share ({run.sigterm.partitions:,}) s",
                        run.sigterm.seconds_to_caught_up, None),
                    Row(f"{at}: SIGTERM share logged take s",
                        run.sigterm.longest_logged_take, None)]
        if run.sigkill is not None:
            out += [Row(f"{at}: SIGKILL share ({run.sigkill.partitions:,}) s",
                        run.sigkill.seconds_to_caught_up, None),
                    Row(f"{at}: SIGKILL detection s", run.sigkill.seconds_to_first_epoch, None),
                    Row(f"{at}: SIGKILL after detection s",
                        run.sigkill.seconds_after_first_epoch, None)]
    return out


def _failover_rows(ours: FailoverResult) -> list[Row]:
    """cronlog's figures only: pgqueuer has no schedulers to kill."""
    out = [Row("failover: runs/s", ours.rate, None)]
    for w in ours.windows:
        out += [Row(f"failover {w.kind}: start lag p50 ms", w.lag.p50_ms, None),
                Row(f"failover {w.kind}: start lag p99 ms", w.lag.p99_ms, None),
                Row(f"failover {w.kind}: start lag max ms", w.lag.max_ms, None)]
    if ours.kill_takeover is not None:
        out.append(Row("failover kill: s until its partitions fired again",
                       ours.kill_takeover.seconds_to_caught_up, None))
    if ours.added_takeover is not None:
        out.append(Row("failover added: s until its share fired",
                       ours.added_takeover.seconds_to_caught_up, None))
    if ours.cpu is not None:
        per = ours.cpu.per_1k_runs
        out += [Row(f"failover baseline: CPU s per 1k runs, {role}", per[role], None)
                for role in CPU_ROLES if role in per]
        if per:
            out.append(Row("failover baseline: CPU s per 1k runs, all roles",
                           round(sum(per.values()), 3), None))
    if ours.audit is not None:
        a = ours.audit
        out.append(Row("failover: fire times doubled / missed",
                       None, None, ours_text=f"{a.violations.get('duplicate fire times', 0)}"
                       f" / {a.violations.get('missing fire times', 0)}"))
    return out


def rows(results: Mapping[str, Mapping[str, Result]]) -> list[Row]:
    out: list[Row] = []
    burst = results.get("burst", {})
    if burst:
        ours, theirs = burst.get("cronlog"), burst.get("pgqueuer")
        out += _burst_rows(ours if isinstance(ours, BurstResult) else None,
                           theirs if isinstance(theirs, BurstResult) else None)
    steady = results.get("steady", {})
    if steady:
        ours_s, theirs_s = steady.get("cronlog"), steady.get("pgqueuer")
        out += _steady_rows(ours_s if isinstance(ours_s, SteadyResult) else None,
                            theirs_s if isinstance(theirs_s, SteadyResult) else None)
    takeover = results.get("takeover", {}).get("cronlog")
    if isinstance(takeover, TakeoverResult):
        out += _takeover_rows(takeover)
    failover = results.get("failover", {}).get("cronlog")
    if isinstance(failover, FailoverResult):
        out += _failover_rows(failover)
    return out


def _cell(value: float | None, text: str | None) -> str:
    if text is not None:
        return text
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """cronlog's figure divided by pgqueuer's: above 1 is better for rates, worse for lags."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def render_table(table_rows: list[Row]) -> str:
    header = ("figure", "cronlog", "pgqueuer", "cronlog/pgqueuer")
    body = [(r.label, _cell(r.ours, r.ours_text), _cell(r.theirs, r.theirs_text),
             _cell(ratio(r.ours, r.theirs), None)) for r in table_rows]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(4)]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                                 for i, c in enumerate(cells)) + " |"

    rule = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":"
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(b) for b in body)])


def render_rss(results: Mapping[str, Mapping[str, Result]]) -> str:
    """Each process's peak RSS per workload: sampled every 0.25 s, and the kernel's VmHWM."""
    workloads = [w for w in ("burst", "steady") if w in results]
    names: dict[str, None] = {}
    for w in workloads:
        for result in results[w].values():
            names.update(dict.fromkeys(result.rss))
    if not names:
        return ""

    def cell(w: str, name: str) -> str:
        for result in results[w].values():
            peak = result.rss.get(name)
            if peak is not None:
                hwm = "-" if peak.hwm_mib is None else f"{peak.hwm_mib:,.1f}"
                return f"{peak.sampled_mib:,.1f} / {hwm}"
        return "-"

    header = ("process", *(f"{w}: peak RSS / VmHWM MiB" for w in workloads))
    body = [(name, *(cell(w, name) for w in workloads)) for name in names]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                                 for i, c in enumerate(cells)) + " |"

    rule = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":"
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(b) for b in body)])


def to_jsonable(results: Mapping[str, Mapping[str, Result]]) -> dict[str, Any]:
    return {workload: {system: asdict(result) for system, result in by_system.items()}
            for workload, by_system in results.items()}


def write_json(paths: list[Path], document: Mapping[str, Any]) -> None:
    text = json.dumps(document, indent=2, sort_keys=False) + "\n"
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
