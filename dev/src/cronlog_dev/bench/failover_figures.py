"""The failover workload's plan and figures, from plain values: when in the window of fire
times a scheduler is killed and one added, which fire times each event is judged by, and
the table of their start lags, ownerless times and the log audit's verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cronlog_dev.bench.role_cpu import RoleCpu
from cronlog_dev.bench.rss import RssPeak
from cronlog_dev.bench.start_lag import RunStart
from cronlog_dev.bench.stats import LagSummary
from cronlog_dev.bench.takeover_figures import Takeover

# The brief's bound on start lag under normal load; issue 19 holds a node failure and an
# added node to it too.
TARGET_P99_MS = 2_000.0
# The first fire times are the schedulers' first dispatches and connections settling, not
# the steady state the baseline stands for.
SETTLE_S = 5


@dataclass(frozen=True)
class Span:
    """Fire times from start_s (inclusive) to end_s (exclusive), offsets in seconds from the
    window's first fire time."""

    kind: str  # baseline, kill, added
    label: str
    start_s: int
    end_s: int


@dataclass(frozen=True)
class FailoverPlan:
    # When the scheduler is killed and when one is added, seconds after the first fire time.
    kill_s: int
    add_s: int
    spans: tuple[Span, ...]
    # Fire times per job: at 0 .. seconds - 1.
    seconds: int


def plan(half_window_s: int, schedulers: int = 3) -> FailoverPlan:
    """A baseline of `half_window_s` seconds, then kill -9 in the middle of the next
    2 x half_window_s seconds and the added scheduler in the middle of the 2 x half_window_s
    after those: each event is judged by the fire times from half_window_s before it to
    half_window_s after, and the windows do not overlap, so no run counts twice. The kill's
    takeover (the session timeout and a catch-up) ends well within its window's second half
    when half_window_s is at least 20."""
    if half_window_s < 1:
        raise ValueError(f"the half window must be at least 1 s, got {half_window_s}")
    w = half_window_s
    kill_s = SETTLE_S + 2 * w
    add_s = kill_s + 2 * w
    return FailoverPlan(kill_s, add_s, (
        Span("baseline", "baseline (three schedulers, no change)", SETTLE_S, SETTLE_S + w),
        Span("kill", f"kill -9 of one of {schedulers} schedulers (±{w} s)", kill_s - w,
             kill_s + w),
        Span("added", f"scheduler {schedulers + 1} added (±{w} s)", add_s - w, add_s + w),
    ), add_s + w)


@dataclass
class WindowFigures:
    """The start lag of the runs due in one span (first attempt start minus fire time, from
    the committed log)."""

    kind: str
    label: str
    # The span's fire times, as UTC instants (ISO 8601).
    first_fire_time: str
    last_fire_time: str
    lag: LagSummary
    not_started: int
    # Fire-time seconds of the span with a run that started more than TARGET_P99_MS late
    # (or not at all): how long the event disturbed firing, not only how much.
    seconds_over_target: int = 0

    @property
    def met(self) -> bool:
        return (self.not_started == 0 and self.lag.p99_ms is not None
                and self.lag.p99_ms <= TARGET_P99_MS)


def seconds_over_target(starts: Sequence[RunStart], first: datetime, last: datetime,
                        bound_ms: float = TARGET_P99_MS) -> int:
    """How many distinct fire-time seconds from first to last (inclusive) had a run that
    started more than bound_ms late, or has not started."""
    late: set[datetime] = set()
    for s in starts:
        if first <= s.scheduled_at <= last:
            lag = s.lag_us
            if lag is None or lag > bound_ms * 1000:
                late.add(s.scheduled_at.replace(microsecond=0))
    return len(late)


@dataclass
class Audit:
    """The chaos suite's log audit (log_audit.py) over the whole window's fire times."""

    jobs: int
    expected_fire_times: int
    runs_scheduled: int
    runs_recorded_missed: int
    # Name of each invariant and how many violated it (all 0: nothing doubled or missed).
    violations: dict[str, int]
    # What the log still lacked when the bench stopped waiting (empty: complete).
    outstanding: str = ""

    @property
    def clean(self) -> bool:
        return not any(self.violations.values()) and not self.outstanding


@dataclass
class FailoverResult:
    system: str
    rate: int
    partitions: int
    schedulers: int
    lookahead_seconds: float
    session_timeout_seconds: float
    window_start: str
    kill_at: str
    add_at: str
    killed: str
    windows: list[WindowFigures]
    # The killed scheduler's partitions, from the kill until another owner had caught up
    # with each; the added scheduler's, from its start until it had caught up with its share.
    kill_takeover: Takeover | None
    added_takeover: Takeover | None
    audit: Audit | None
    lag_source: str
    rss: dict[str, RssPeak] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Each role's CPU over the baseline, per 1,000 runs of the steady load.
    cpu: RoleCpu | None = None

    def window(self, kind: str) -> WindowFigures | None:
        return next((w for w in self.windows if w.kind == kind), None)


def verdict(result: FailoverResult) -> str:
    """Whether the kill's and the added scheduler's windows kept p99 within the target."""
    parts = []
    for kind, name in (("kill", "kill -9"), ("added", "added scheduler")):
        w = result.window(kind)
        if w is None or w.lag.p99_ms is None:
            parts.append(f"{name}: not measured")
            continue
        unstarted = f", {w.not_started:,} not started" if w.not_started else ""
        parts.append(f"{name}: p99 {w.lag.p99_ms:,.0f} ms, max {w.lag.max_ms or 0:,.0f} ms"
                     f"{unstarted}: {'met' if w.met else 'MISSED'}")
    return (f"target p99 <= {TARGET_P99_MS:,.0f} ms at {result.rate:,} runs/s: "
            + "; ".join(parts))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_failover(result: FailoverResult) -> str:
    """The windows' lags, the two takeovers and the audit, as Markdown tables."""
    lines = ["| runs due in | runs | p50 ms | p99 ms | max ms | not started | "
             "fire-time seconds > 2 s late | p99 <= 2 s |", "|---|--:|--:|--:|--:|--:|--:|:-:|"]
    for w in result.windows:
        judged = "-" if w.kind == "baseline" else ("yes" if w.met else "NO")
        lines.append(f"| {w.label} | {w.lag.count:,} | {_ms(w.lag.p50_ms)} | "
                     f"{_ms(w.lag.p99_ms)} | {_ms(w.lag.max_ms)} | {w.not_started:,} | "
                     f"{w.seconds_over_target} | {judged} |")
    lines += ["", "| partitions moved | count | first new epoch s | all caught up s | "
              "longest logged take s |", "|---|--:|--:|--:|--:|"]
    for name, t in (("killed scheduler's, from the kill", result.kill_takeover),
                    ("to the added scheduler, from its start", result.added_takeover)):
        if t is None:
            lines.append(f"| {name} | - | - | - | - |")
        else:
            lines.append(f"| {name} | {t.partitions:,} | {_s(t.seconds_to_first_epoch)} | "
                         f"{_s(t.seconds_to_caught_up)} | {_s(t.longest_logged_take)} |")
    if result.audit is not None:
        a = result.audit
        broken = ", ".join(f"{k} {v:,}" for k, v in a.violations.items())
        lines += ["", f"log audit: {a.runs_scheduled:,} of {a.expected_fire_times:,} fire "
                  f"times of {a.jobs:,} jobs recorded ({a.runs_recorded_missed:,} as missed); "
                  f"{broken}" + (f"; still outstanding: {a.outstanding}" if a.outstanding
                                 else "")]
    if result.cpu is not None and result.cpu.per_1k_runs:
        per = result.cpu.per_1k_runs
        lines += ["", f"CPU s per 1,000 runs over the baseline ({result.cpu.runs:,} runs in "
                  f"{result.cpu.window_seconds:.0f} s): " + ", ".join(
                      f"{role} {per[role]:.3f}" for role in sorted(per))
                  + f"; all {sum(per.values()):.3f}"]
    lines += ["", verdict(result)]
    return "\n".join(lines)
