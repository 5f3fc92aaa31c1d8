"""The scale workload's plan and figures, from plain values: the job mix of a million jobs,
the minute its top-of-the-hour burst is moved to, and the table beside pgqueuer's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

from cronlog_dev.bench.results import Row, render_table, total_rss
from cronlog_dev.bench.rss import RssPeak
from cronlog_dev.bench.stats import BurstFigures
from cronlog_dev.bench.takeover_figures import Takeover
from cronlog_dev.bench.timing import plan_due

# Fifty real IANA zones: whole-hour, half-hour and quarter-hour offsets, both hemispheres'
# daylight saving rules and none.
ZONES = (
    "UTC", "Europe/London", "Europe/Dublin", "Europe/Lisbon", "Europe/Paris",
    "Europe/Berlin", "Europe/Madrid", "Europe/Rome", "Europe/Warsaw", "Europe/Stockholm",
    "Europe/Athens", "Europe/Helsinki", "Europe/Istanbul", "Europe/Moscow", "Africa/Lagos",
    "Africa/Cairo", "Africa/Johannesburg", "Africa/Nairobi", "Asia/Dubai", "Asia/Tehran",
    "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Dhaka", "Asia/Bangkok",
    "Asia/Jakarta", "Asia/Singapore", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Manila",
    "Asia/Seoul", "Asia/Tokyo", "Australia/Perth", "Australia/Adelaide", "Australia/Sydney",
    "Australia/Brisbane", "Pacific/Auckland", "Pacific/Honolulu", "America/Anchorage",
    "America/Los_Angeles", "America/Denver", "America/Phoenix", "America/Chicago",
    "America/Mexico_City", "America/New_York", "America/Toronto", "America/Bogota",
    "America/Santiago", "America/Sao_Paulo", "America/St_Johns",
)
# The share of every-minute jobs.
EVERY_MINUTE_SHARE = 0.05


@dataclass(frozen=True)
class JobMix:
    """How many of each kind; hourly + daily + every_minute + burst is the total."""

    hourly: int
    daily: int
    every_minute: int
    burst: int

    @property
    def total(self) -> int:
        return self.hourly + self.daily + self.every_minute + self.burst


def job_mix(total: int, burst: int) -> JobMix:
    """5% every minute, `burst` at the top of the hour, the rest half hourly, half daily."""
    every_minute = round(total * EVERY_MINUTE_SHARE)
    if burst < 0 or burst + every_minute > total:
        raise ValueError(f"scale_burst_jobs: {burst:,} top-of-the-hour jobs and the "
                         f"{every_minute:,} every-minute ones do not fit in scale_jobs "
                         f"({total:,})")
    rest = total - every_minute - burst
    return JobMix(hourly=rest - rest // 2, daily=rest // 2, every_minute=every_minute,
                  burst=burst)


def background_cron(i: int) -> tuple[str, str]:
    """The cron expression and zone of background job i: even ones hourly, odd ones daily,
    at minutes and hours spread evenly, in the fifty zones in turn."""
    minute = (i * 7) % 60
    zone = ZONES[i % len(ZONES)]
    if i % 2 == 0:
        return f"{minute} * * * *", zone
    return f"{minute} {(i // 2) % 24} * * *", zone


def every_minute_cron(i: int) -> str:
    """Every minute, each job at its own second of it: a steady load rather than a burst
    at second 0 of every minute, which would compete with the measured burst itself."""
    return f"{i % 60} * * * * *"


def burst_cron(due: float) -> str:
    """Hourly at the minute of `due` (a whole UTC minute), in UTC."""
    return f"{int(due // 60) % 60} * * * *"


def plan_burst(now: float, jobs: int, creation_rate: float, lookahead: float,
               min_lead: float, max_lead: float, safety: float = 1.5) -> float:
    """The whole UTC minute the burst is due at: after `jobs` more jobs created at the
    measured rate, `safety` times the time they take, and the schedulers' lookahead before
    it (they pre-enqueue the runs that far ahead)."""
    due = plan_due(now, jobs, creation_rate, min_lead + lookahead, max_lead + lookahead,
                   safety)
    return float(math.ceil(due / 60) * 60)


@dataclass
class Creation:
    jobs: int
    # Items the api answered with an error.
    failed: int
    answered_seconds: float
    # Until Postgres held them all; None when it never did within the cap.
    stored_seconds: float | None
    per_second_answered: float | None
    per_second_stored: float | None


def creation(jobs: int, failed: int, answered_seconds: float,
             stored_seconds: float | None) -> Creation:
    return Creation(jobs, failed, round(answered_seconds, 2),
                    None if stored_seconds is None else round(stored_seconds, 2),
                    round(jobs / answered_seconds, 1) if answered_seconds > 0 else None,
                    round(jobs / stored_seconds, 1)
                    if stored_seconds is not None and stored_seconds > 0 else None)


@dataclass
class IdleCpu:
    """The schedulers' CPU over a window in which no run was due."""

    window_seconds: float
    cpu_seconds: dict[str, float]
    # CPU seconds per second, all schedulers together.
    per_second: float


def idle_cpu(window_seconds: float, cpu_seconds: dict[str, float]) -> IdleCpu:
    return IdleCpu(round(window_seconds, 2), {k: round(v, 3) for k, v in cpu_seconds.items()},
                   round(sum(cpu_seconds.values()) / window_seconds, 4))


class PgqScaleFigures(Protocol):
    """What the table reads of pgqueuer's side (pgq_scale.PgqScaleResult)."""

    rows_enqueued: int
    enqueue_per_second: float
    table_mb: float
    burst_jobs: int
    burst_started: int
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_max_ms: float | None
    burst_all_started_seconds: float | None


@dataclass
class ScaleResult:
    system: str
    jobs: int
    partitions: int
    mix: JobMix
    apis: int
    schedulers: int
    workers: int
    batch_size: int
    in_flight: int
    # The background (hourly and daily) jobs, then the burst's and the every-minute ones.
    creation: Creation
    late_creation: Creation | None
    database_mb: float | None
    idle: IdleCpu | None
    burst_due_at: str
    burst_cron: str
    burst: BurstFigures | None
    # SIGTERM to one of two schedulers: the other takes all of its partitions.
    takeover: Takeover | None
    rss: dict[str, RssPeak] = field(default_factory=dict)
    # Wall seconds of each phase, in order.
    phases: dict[str, float] = field(default_factory=dict)
    # CPU seconds of each process while the hourly and daily jobs were created: which one
    # limits the rate.
    creation_cpu_seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def all_creation(self) -> Creation:
        """Every job of the workload: all creation phases together."""
        return self.creation if self.late_creation is None else combined(self.creation,
                                                                         self.late_creation)


def combined(a: Creation, b: Creation) -> Creation:
    """Two creation phases as one: their jobs over their times added up."""
    stored = (None if a.stored_seconds is None or b.stored_seconds is None
              else a.stored_seconds + b.stored_seconds)
    return creation(a.jobs + b.jobs, a.failed + b.failed,
                    a.answered_seconds + b.answered_seconds, stored)


def _peak(rss: dict[str, RssPeak], prefix: str) -> float | None:
    """The largest peak among the processes whose name starts with prefix."""
    values = [p.sampled_mib for name, p in rss.items() if name.startswith(prefix)]
    return max(values) if values else None


def scale_rows(ours: ScaleResult | None, theirs: PgqScaleFigures | None) -> list[Row]:
    out: list[Row] = []
    created = None if ours is None else ours.all_creation()
    out += [
        Row("scale: jobs registered (pgqueuer: rows)", None if ours is None else ours.jobs,
            None if theirs is None else theirs.rows_enqueued),
        Row("scale: bulk creation/enqueue jobs/s", None if created is None
            else created.per_second_answered,
            None if theirs is None else theirs.enqueue_per_second),
        Row("scale: jobs/s stored in Postgres", None if created is None
            else created.per_second_stored, None),
        Row("scale: Postgres MB (cronlog: database; pgqueuer: table)",
            None if ours is None else ours.database_mb,
            None if theirs is None else theirs.table_mb),
    ]
    b = None if ours is None else ours.burst
    out += [
        Row("scale burst: runs started by the cap", None if b is None else b.started,
            None if theirs is None else theirs.burst_started,
            ours_text=None if b is None else f"{b.started}/{b.expected}",
            theirs_text=None if theirs is None
            else f"{theirs.burst_started}/{theirs.burst_jobs}"),
        Row("scale burst: s from T to last start", None if b is None else b.seconds_to_last_start,
            None if theirs is None else theirs.burst_all_started_seconds),
        Row("scale burst: start lag p50 ms", None if b is None else b.lag.p50_ms,
            None if theirs is None else theirs.lag_p50_ms),
        Row("scale burst: start lag p99 ms", None if b is None else b.lag.p99_ms,
            None if theirs is None else theirs.lag_p99_ms),
        Row("scale burst: start lag max ms", None if b is None else b.lag.max_ms,
            None if theirs is None else theirs.lag_max_ms),
    ]
    if ours is not None:
        t = ours.takeover
        out += [
            Row("scale: peak RSS MiB, largest scheduler", _peak(ours.rss, "scheduler"), None),
            Row("scale: peak RSS MiB, largest worker", _peak(ours.rss, "worker"), None),
            Row("scale: peak RSS MiB, largest api", _peak(ours.rss, "api"), None),
            Row("scale: peak RSS MiB (all processes)", total_rss(ours.rss), None),
            Row("scale: idle scheduler CPU s/s (all schedulers)",
                None if ours.idle is None else ours.idle.per_second, None),
            Row("scale takeover: first partition s", None if t is None
                else t.seconds_to_first_epoch, None),
            Row("scale takeover: ms per partition", None if t is None else t.ms_per_partition,
                None),
            Row(f"scale takeover: all of a scheduler's ({0 if t is None else t.partitions:,}) s",
                None if t is None else t.seconds_to_caught_up, None),
        ]
    return out


def render_scale(ours: ScaleResult | None, theirs: PgqScaleFigures | None) -> str:
    """The figures side by side, cronlog/pgqueuer where both have one, then each phase's
    wall time."""
    table = render_table(scale_rows(ours, theirs))
    if ours is None or not ours.phases:
        return table
    phases = ", ".join(f"{name} {seconds:,.0f} s" for name, seconds in ours.phases.items())
    return f"{table}\n\ncronlog scale phases: {phases}"
