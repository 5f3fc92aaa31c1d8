"""What each workload reports, the side-by-side table and the JSON file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cronlog.infra.bench.rss import RssPeak
from cronlog.infra.bench.stats import BurstFigures, SteadyFigures


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


Result = BurstResult | SteadyResult


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


def _burst_rows(ours: BurstResult | None, theirs: BurstResult | None) -> list[Row]:
    def get(r: BurstResult | None, f: Callable[[BurstResult], float | None]) -> float | None:
        return None if r is None else f(r)

    def started(r: BurstResult | None) -> str | None:
        return None if r is None else f"{r.figures.started}/{r.figures.expected}"

    return [
        Row("burst: runs started by the cap", get(ours, lambda r: r.figures.started),
            get(theirs, lambda r: r.figures.started), started(ours), started(theirs)),
        Row("burst: s from T to last start", get(ours, lambda r: r.figures.seconds_to_last_start),
            get(theirs, lambda r: r.figures.seconds_to_last_start)),
        Row("burst: dispatches/s", get(ours, lambda r: r.figures.dispatches_per_second),
            get(theirs, lambda r: r.figures.dispatches_per_second)),
        Row("burst: start lag p50 ms", get(ours, lambda r: r.figures.lag.p50_ms),
            get(theirs, lambda r: r.figures.lag.p50_ms)),
        Row("burst: start lag p99 ms", get(ours, lambda r: r.figures.lag.p99_ms),
            get(theirs, lambda r: r.figures.lag.p99_ms)),
        Row("burst: start lag max ms", get(ours, lambda r: r.figures.lag.max_ms),
            get(theirs, lambda r: r.figures.lag.max_ms)),
        Row("burst: jobs created/s", get(ours, lambda r: r.creation.per_second),
            get(theirs, lambda r: r.creation.per_second)),
        Row("burst: peak RSS MiB (all processes)", get(ours, lambda r: total_rss(r.rss)),
            get(theirs, lambda r: total_rss(r.rss))),
    ]


def _steady_rows(ours: SteadyResult | None, theirs: SteadyResult | None) -> list[Row]:
    def get(r: SteadyResult | None, f: Callable[[SteadyResult], float | None]) -> float | None:
        return None if r is None else f(r)

    def started(r: SteadyResult | None) -> str | None:
        return None if r is None else f"{r.figures.started}/{r.figures.due}"

    return [
        Row("steady: target runs/s", get(ours, lambda r: r.figures.target_rate),
            get(theirs, lambda r: r.figures.target_rate)),
        Row("steady: achieved runs/s", get(ours, lambda r: r.figures.achieved_per_second),
            get(theirs, lambda r: r.figures.achieved_per_second)),
        Row("steady: due runs started by the cap", get(ours, lambda r: r.figures.started),
            get(theirs, lambda r: r.figures.started), started(ours), started(theirs)),
        Row("steady: start lag p50 ms", get(ours, lambda r: r.figures.lag.p50_ms),
            get(theirs, lambda r: r.figures.lag.p50_ms)),
        Row("steady: start lag p99 ms", get(ours, lambda r: r.figures.lag.p99_ms),
            get(theirs, lambda r: r.figures.lag.p99_ms)),
        Row("steady: peak RSS MiB (all processes)", get(ours, lambda r: total_rss(r.rss)),
            get(theirs, lambda r: total_rss(r.rss))),
    ]


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
