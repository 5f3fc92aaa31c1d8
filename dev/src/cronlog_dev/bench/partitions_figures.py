"""The partitions workload's plan and figures (issue 34, item 5), from plain values: which
Kafka partition count goes with each logical one, when the steady window and the burst
fall, CPU per 1,000 runs of every process at each layout and its ratio to the first
layout's, and the table.

One layout's run: `rate` x 60 every-minute jobs, each at its own second of the minute
(`rate` runs every second), firing over a window of `seconds` that starts on a whole
minute, and `burst` one-off jobs all due at one instant in the middle of it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cronlog_dev.bench.rss import RssPeak
from cronlog_dev.bench.stats import BurstFigures, SteadyFigures

# The processes in the order of the table; "all processes" sums whatever was measured.
ROLES = ("scheduler", "worker", "projector", "kafka", "postgres", "clickhouse")
ALL = "all processes"
# The default Kafka partitions of a layout: a sixteenth of the logical count, at least 8
# (or L itself below 8): 8 -> 8, 64 -> 8, 1,024 -> 64 (the guess). The 64 layout
# then has the 8 layout's Kafka width, so its ratio is the logical count's cost alone.
KAFKA_PER_LOGICAL = 16
KAFKA_AT_LEAST = 8


def default_kafka(logical: int) -> int:
    """The Kafka partitions used for `logical` when --partitions-kafka does not say."""
    kafka = max(min(logical, KAFKA_AT_LEAST), logical // KAFKA_PER_LOGICAL)
    # A count that is not a power of two may have no such divisor: fall back to L.
    return kafka if logical % kafka == 0 else logical


def layouts(logical: Sequence[int], kafka: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """(logical, Kafka) partitions of each layout, in the order given. kafka: empty for
    the default of each, or one count per logical one, each dividing it."""
    if not logical:
        raise ValueError("--partitions-layouts: give at least one logical partition count")
    if kafka and len(kafka) != len(logical):
        raise ValueError(f"--partitions-kafka: give one Kafka partition count for each of "
                         f"the {len(logical)} --partitions-layouts counts (got {len(kafka)})")
    pairs = tuple(zip(logical, kafka or [default_kafka(n) for n in logical], strict=True))
    for n, k in pairs:
        if k <= 0 or n % k:
            raise ValueError(f"--partitions-kafka: {k} Kafka partitions do not divide "
                             f"{n} logical ones")
    return pairs


# Each every-minute job fires once a minute at its own second: a shorter window would leave
# the jobs of its later seconds no fire time at all (the spec is refused).
MIN_SECONDS = 60


def check_seconds(seconds: int) -> int:
    if seconds < MIN_SECONDS:
        raise ValueError(f"--partitions-seconds: at least {MIN_SECONDS} (every job of the "
                         f"minute fires once), got {seconds}")
    return seconds


def steady_jobs(rate: int) -> int:
    """Every-minute jobs, each at its own second, that make `rate` runs every second."""
    return rate * 60


def steady_cron(i: int) -> str:
    """Every minute, job i at second i mod 60."""
    return f"{i % 60} * * * * *"


def window_start(earliest: float) -> float:
    """The whole minute the steady window starts at: every second of a window starting on
    a minute has `rate` runs due from the first one."""
    return float(math.ceil(earliest / 60) * 60)


def burst_due(start: float, seconds: int) -> float:
    """The burst's instant: the middle second of the window, amid the steady load."""
    return start + seconds // 2


def per_thousand(core_seconds: Mapping[str, float], runs: int) -> dict[str, float]:
    """Core-seconds per 1,000 runs of each process and of all of them together; empty when
    no run started."""
    if runs <= 0:
        return {}
    out = {role: round(seconds / runs * 1000, 3) for role, seconds in core_seconds.items()}
    out[ALL] = round(sum(core_seconds.values()) / runs * 1000, 3)
    return out


def ratios(figures: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, float]:
    """Each figure divided by the baseline layout's same figure, where both exist and the
    baseline's is not zero."""
    return {role: round(value / baseline[role], 2) for role, value in figures.items()
            if baseline.get(role)}


@dataclass
class LayoutRun:
    """One layout's measurement."""

    logical: int
    kafka: int
    steady_rate: int
    steady_seconds: int
    burst_jobs: int
    window_start: str = ""
    burst_due_at: str = ""
    # Runs that started by the cap, steady and burst, and the CPU window's core-seconds
    # by process (schedulers summed, as workers).
    runs: int = 0
    window_seconds: float | None = None
    core_seconds: dict[str, float] = field(default_factory=dict)
    per_1k_runs: dict[str, float] = field(default_factory=dict)
    # per_1k_runs divided by the first layout's.
    ratio_to_first: dict[str, float] = field(default_factory=dict)
    steady: SteadyFigures | None = None
    burst: BurstFigures | None = None
    # Why the layout has no figures, when it failed.
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.logical:,} / {self.kafka:,}"


@dataclass
class PartitionsResult:
    system: str
    runs: list[LayoutRun]
    cpu_source: str
    lag_source: str
    # Not sampled here: the burst and steady workloads say each process's memory.
    rss: dict[str, RssPeak] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def with_ratios(runs: Sequence[LayoutRun]) -> None:
    """Fills each run's ratio_to_first from the first run that has figures."""
    baseline = next((r.per_1k_runs for r in runs if r.per_1k_runs), None)
    for run in runs:
        run.ratio_to_first = ratios(run.per_1k_runs, baseline) if baseline else {}


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _rows(result: PartitionsResult) -> list[tuple[str, ...]]:
    runs = result.runs
    first = next((r for r in runs if r.per_1k_runs), None)
    base = "first" if first is None else f"{first.logical:,}"
    measured = [role for role in ROLES if any(role in r.per_1k_runs for r in runs)]
    out: list[tuple[str, ...]] = []

    def row(label: str, cells: Sequence[str]) -> None:
        out.append((label, *cells))

    row("runs started by the cap (steady + burst)",
        [f"{r.runs:,}/{r.steady_rate * r.steady_seconds + r.burst_jobs:,}" for r in runs])
    for role in (*measured, ALL):
        row(f"CPU s per 1k runs, {role}", [_cell(r.per_1k_runs.get(role)) for r in runs])
    for role in (*measured, ALL):
        row(f"CPU per 1k runs / at {base} partitions, {role}",
            [_cell(r.ratio_to_first.get(role)) for r in runs])
    def started(figures: SteadyFigures | BurstFigures | None) -> str:
        if figures is None:
            return "-"
        out_of = figures.due if isinstance(figures, SteadyFigures) else figures.expected
        return f"{figures.started:,}/{out_of:,}"

    def lag(figures: SteadyFigures | BurstFigures | None, q: str) -> str:
        return _cell(None if figures is None else getattr(figures.lag, f"{q}_ms"))

    for what in ("steady", "burst"):
        of = [r.steady if what == "steady" else r.burst for r in runs]
        row(f"{what}: runs started by the cap", [started(f) for f in of])
        for q in ("p50", "p99", "max"):
            row(f"{what}: start lag {q} ms", [lag(f, q) for f in of])
    return out


def render_partitions(result: PartitionsResult) -> str:
    """One column per layout (logical / Kafka partitions), in the order run."""
    header = ("figure", *(f"{r.label} partitions" for r in result.runs))
    body = _rows(result)
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                                 for i, c in enumerate(cells)) + " |"

    rule = "|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":"
                          for i, w in enumerate(widths)) + "|"
    failed = [f"{r.label}: {r.error}" for r in result.runs if r.error]
    table = "\n".join([line(header), rule, *(line(b) for b in body)])
    return table if not failed else table + "\n\nfailed layouts: " + "; ".join(failed)
