"""The burst and steady workloads on cronlog."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from cronlog.domain.spec import JobSpec
from cronlog.infra.config import Settings
from cronlog_dev.bench import cronlog_history as history
from cronlog_dev.bench.cronlog_jobs import send_create_commands, wait_for_jobs
from cronlog_dev.bench.cronlog_service import CronlogService
from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.results import BurstResult, Creation, SteadyResult
from cronlog_dev.bench.role_cpu import RoleCpu, RoleCpuWindow, cpu_notes, server_pids
from cronlog_dev.bench.rss import RssSampler
from cronlog_dev.bench.stack import isolated_settings
from cronlog_dev.bench.stats import burst_figures, late_starts_note, steady_figures
from cronlog_dev.bench.timing import plan_due

TENANT = "bench"
WARMUP_TENANT = "bench-warmup"
LAG_SOURCE = ("ClickHouse history `runs`, first attempts: started_at (worker clock at start) "
              "minus not_before (the run's due instant; no spread, so its fire time)")
_US = 1_000_000
MIN_LEAD = 10.0
# After the steady window's last fire time, how long its CPU is still counted: the last
# runs start, finish and are reported, their owners record the reports, the projector
# writes them (as metrics_cost's window).
CPU_TAIL_SECONDS = 10.0


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _warm_up(settings: Settings, wanted: int, run: str) -> float:
    """Creates jobs that fire only in a day, first to get the scheduler going, then to time
    creation; returns jobs created per second."""
    far = _at(time.time() + 86_400)

    def specs(n: int, tag: str) -> Iterator[JobSpec]:
        for i in range(n):
            yield JobSpec(name=f"warmup-{tag}-{i}", tenant=WARMUP_TENANT, queue="default",
                          handler="echo", at=far)

    send_create_commands(settings, f"{run}-warm0", specs(100, "a"))
    seen, _ = wait_for_jobs(settings.postgres_dsn, WARMUP_TENANT, 100, time.time() + 120)
    if seen < 100:
        raise RuntimeError("cronlog took no job in 120 s; see the scheduler's log")
    start = time.time()
    send_create_commands(settings, f"{run}-warm1", specs(wanted, "b"))
    seen, at = wait_for_jobs(settings.postgres_dsn, WARMUP_TENANT, 100 + wanted, start + 300)
    return (seen - 100) / max(at - start, 1e-3)


def _create(settings: Settings, options: BenchOptions, run: str, count: int,
            spec_at: Callable[[float, int], JobSpec],
            lookahead: timedelta) -> tuple[float, Creation]:
    """Creates the workload's jobs, all in place `lookahead` before their due time, when the
    owners start pre-enqueueing their runs."""
    # Large enough to time creation within a few percent despite polling Postgres.
    rate = _warm_up(settings, min(max(count // 10, 1000), 5000), run)
    now = time.time()
    lead = lookahead.total_seconds()
    due = plan_due(now, count, rate, MIN_LEAD + lead, options.max_create + lead)
    say(f"[cronlog] warm-up created {rate:,.0f} jobs/s; creating {count:,} jobs due at "
        f"{_at(due):%H:%M:%S} (in {due - now:.0f} s)")
    send_create_commands(settings, run, (spec_at(due, i) for i in range(count)))
    # Jobs still arriving within the lookahead would be fired late and skew the figures
    # without saying so: creation counts only until just before that.
    until = due - lead - 1
    seen, at = wait_for_jobs(settings.postgres_dsn, TENANT, count, until,
                             progress=lambda n: say(f"[cronlog] {n:,} of {count:,} jobs in place"))
    seconds = at - now
    say(f"[cronlog] {seen:,} of {count:,} jobs in place after {seconds:.1f} s")
    return due, Creation(count, seen, seconds if seen >= count else None,
                         seen / seconds if seconds > 0 else None, due - now)


class SteadyWatch(Protocol):
    """Looks on while a steady run goes (the metrics-cost workload, metrics_cost.py)."""

    # Whether the run's processes serve /metrics.
    metrics: bool

    def started(self, service: CronlogService) -> None: ...
    # Once the window is planned, before its runs are dispatched.
    def window(self, first_due: float, seconds: int, lookahead: float) -> None: ...
    # Once the window's runs have started, while the processes still run.
    def finish(self) -> None: ...
    def stop(self) -> None: ...


def _service(stack_settings: Settings, options: BenchOptions, workload: str,
             log_root: Path, metrics: bool = False) -> tuple[CronlogService, RssSampler]:
    settings = isolated_settings(stack_settings, workload, options.worker_slots)
    if options.lookahead_ms:
        settings = settings.with_overrides(lookahead=timedelta(milliseconds=options.lookahead_ms))
    if options.sparse_lookahead_ms is not None:
        settings = settings.with_overrides(
            sparse_lookahead=timedelta(milliseconds=options.sparse_lookahead_ms))
    service = CronlogService(settings, log_root / f"cronlog-{workload}",
                             schedulers=options.schedulers, workers=options.workers,
                             metrics=metrics)
    sampler = RssSampler()
    return service, sampler


def run_burst(stack_settings: Settings, options: BenchOptions, log_root: Path) -> BurstResult:
    service, sampler = _service(stack_settings, options, "burst", log_root)
    count = options.burst_jobs
    try:
        service.start()
        for name, pid in service.pids().items():
            sampler.watch(name, pid)
        sampler.start()
        # One-off jobs: pre-enqueued a sparse lookahead ahead.
        lookahead = max(service.settings.lookahead, service.settings.sparse_lookahead)
        due, creation = _create(service.settings, options, "burst", count, lambda due, i: JobSpec(
            name=f"burst-{i}", tenant=TENANT, queue="default", handler="echo", at=_at(due)),
            lookahead)
        deadline = due + options.max_wait
        history.wait_started(service.settings, count, deadline, "burst", service.check_alive)
        # The projector can trail the workers by tens of seconds after a burst.
        history.wait_settled(service.settings, limit=max(60.0, options.max_wait))
        rss = sampler.stop()
        starts = history.first_attempt_starts(service.settings)
        figures = burst_figures(int(due * _US), count, starts, int(deadline * _US))
    finally:
        sampler.stop()
        service.stop()
    notes = [] if figures.started >= count else [
        f"{figures.started:,} of {count:,} started within {options.max_wait:.0f} s of T; the "
        f"lag figures cover those only (the others waited longer than {options.max_wait:.0f} s)"]
    if creation.in_place < count:
        notes.append(f"only {creation.in_place:,} of {count:,} jobs were in place before T")
    late = late_starts_note(starts)
    if late:
        notes.append(late)
    return BurstResult("cronlog", _at(due).isoformat(), options.max_wait, creation, figures,
                       LAG_SOURCE, rss, notes)


WARM_UP_RATE = 1_500


def warm_up_servers(stack_settings: Settings, options: BenchOptions, log_root: Path) -> None:
    """Runs an unmeasured steady load so the measured workloads meet warm servers, as a
    long-running deployment's are (Kafka's JIT compiler, Postgres' and ClickHouse's caches)."""
    warm = replace(options, steady_rate=WARM_UP_RATE, steady_seconds=options.warm_up_seconds,
                   max_wait=30.0)
    result = run_steady(stack_settings, warm, log_root, workload="warmup")
    say(f"[cronlog] warm-up load: {result.figures.started:,} of {result.figures.due:,} runs "
        "started (not measured)")


def run_steady(stack_settings: Settings, options: BenchOptions, log_root: Path,
               workload: str = "steady", watch: SteadyWatch | None = None) -> SteadyResult:
    service, sampler = _service(stack_settings, options, workload, log_root,
                                metrics=watch is not None and watch.metrics)
    rate, seconds = options.steady_rate, options.steady_seconds
    servers = server_pids(stack_settings)
    cpu_window = RoleCpuWindow(lambda: {**service.pids(), **servers}, CPU_TAIL_SECONDS)
    cpu: RoleCpu | None = None
    try:
        service.start()
        for name, pid in service.pids().items():
            sampler.watch(name, pid)
        sampler.start()
        if watch is not None:
            watch.started(service)
        # end_at is inclusive: `seconds` fire times per job, at start .. start + seconds - 1.
        start, creation = _create(service.settings, options, workload, rate,
                                  lambda start, i: JobSpec(
                                      name=f"{workload}-{i}", tenant=TENANT, queue="default",
                                      handler="echo", cron="* * * * * *", start_at=_at(start),
                                      end_at=_at(start + seconds - 1)),
                                  service.settings.lookahead)
        lookahead = service.settings.lookahead.total_seconds()
        if watch is not None:
            watch.window(start, seconds, lookahead)
        cpu_window.begin(start, seconds, lookahead)
        deadline = start + seconds + options.max_wait
        history.wait_started(service.settings, rate * seconds, deadline, workload,
                             service.check_alive)
        if watch is not None:
            watch.finish()
        # The projector can trail the workers by tens of seconds after a burst.
        history.wait_settled(service.settings, limit=max(60.0, options.max_wait))
        rss = sampler.stop()
        start_us = int(start * _US)
        scheduled = history.scheduled_count(service.settings, start_us,
                                            start_us + seconds * _US)
        starts = history.first_attempt_starts(service.settings)
        figures = steady_figures(rate, start_us, seconds, rate * seconds, starts,
                                 int(deadline * _US))
        # The window's CPU is its runs', as metrics_cost counts it.
        cpu = cpu_window.end(figures.started)
    finally:
        if watch is not None:
            watch.stop()
        cpu_window.stop()
        sampler.stop()
        service.stop()
    notes = [f"{scheduled:,} of {rate * seconds:,} fire times were scheduled (in the history)"]
    notes += cpu_notes(cpu, servers)
    if creation.in_place < rate:
        notes.append(f"only {creation.in_place:,} of {rate:,} jobs were in place before the window")
    if figures.started < figures.due:
        notes.append(f"{figures.started:,} of {figures.due:,} due runs started by "
                     f"{options.max_wait:.0f} s after the window; the lag figures cover those only")
    late = late_starts_note(starts)
    if late:
        notes.append(late)
    return SteadyResult("cronlog", _at(start).isoformat(), options.max_wait, creation, figures,
                        LAG_SOURCE, rss, notes, cpu)

