"""The partitions workload on cronlog (issue 34, item 5): the same steady load and burst at
each layout of --partitions-layouts logical over --partitions-kafka Kafka partitions, in
turn, each on topics and databases of its own, its processes stopped before the next.

For each layout:

1. start the schedulers, workers and history projector (CronlogService) on the layout;
2. time creation on a warm-up (jobs due in a day), then put on the inbox rate x 60
   every-minute jobs, each at its own second (`rate` runs every second), from a whole
   minute S to S + seconds, and the burst's one-off jobs, all due at the window's middle
   second T; S is planned so that all of them are in Postgres before the schedulers'
   (sparse) lookahead before S;
3. read the CPU of every process (cronlog's and the servers') from the lookahead before S
   to CPU_TAIL_SECONDS after the window, and divide by the runs started by the cap;
4. the start lag of the steady runs and of the burst's from the history (ClickHouse
   `runs`, first attempts), each tenant apart.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cronlog.domain.spec import JobSpec
from cronlog.infra.config import Settings
from cronlog_dev.bench import cronlog_history as history
from cronlog_dev.bench.cronlog_jobs import send_create_commands, wait_for_jobs
from cronlog_dev.bench.cronlog_service import CronlogService
from cronlog_dev.bench.cronlog_workloads import CPU_TAIL_SECONDS, LAG_SOURCE, MIN_LEAD, _warm_up
from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.partitions_figures import (
    LayoutRun,
    PartitionsResult,
    burst_due,
    layouts,
    per_thousand,
    steady_cron,
    steady_jobs,
    window_start,
    with_ratios,
)
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.role_cpu import SOURCE, RoleCpuWindow, cpu_notes, server_pids
from cronlog_dev.bench.stack import isolated_settings
from cronlog_dev.bench.stats import burst_figures, steady_figures
from cronlog_dev.bench.timing import plan_due

STEADY_TENANT = "partitions-steady"
BURST_TENANT = "partitions-burst"
_US = 1_000_000
# Room to spare when planning S from the warm-up's creation rate.
PLAN_SAFETY = 1.5


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _settings(stack_settings: Settings, options: BenchOptions, logical: int,
              kafka: int) -> Settings:
    settings = isolated_settings(stack_settings, f"parts{logical}", options.worker_slots)
    settings = settings.with_overrides(partitions=logical,
                                       kafka_partitions=None if kafka == logical else kafka)
    if options.lookahead_ms:
        settings = settings.with_overrides(lookahead=timedelta(milliseconds=options.lookahead_ms))
    if options.sparse_lookahead_ms is not None:
        settings = settings.with_overrides(
            sparse_lookahead=timedelta(milliseconds=options.sparse_lookahead_ms))
    return settings


def _create(settings: Settings, options: BenchOptions, run: LayoutRun,
            lead: float) -> tuple[float, float]:
    """Creates the steady and burst jobs; returns (S, T)."""
    rate = options.partitions_steady_rate
    count = steady_jobs(rate) + run.burst_jobs
    per_second = _warm_up(settings, min(max(count // 10, 1000), 5000), f"parts{run.logical}")
    now = time.time()
    start = window_start(plan_due(now, count, per_second, MIN_LEAD + lead,
                                  options.max_create + lead, PLAN_SAFETY))
    seconds = options.partitions_seconds
    due = burst_due(start, seconds)
    run.window_start, run.burst_due_at = _at(start).isoformat(), _at(due).isoformat()
    say(f"[cronlog] partitions {run.label}: warm-up created {per_second:,.0f} jobs/s; creating "
        f"{steady_jobs(rate):,} every-minute jobs from {_at(start):%H:%M:%S} and "
        f"{run.burst_jobs:,} burst jobs due at {_at(due):%H:%M:%S} (in {due - now:.0f} s)")
    send_create_commands(settings, f"parts{run.logical}-steady", (
        JobSpec(name=f"steady-{i}", tenant=STEADY_TENANT, queue="default", handler="echo",
                cron=steady_cron(i), time_zone="UTC", start_at=_at(start),
                end_at=_at(start + seconds - 1))
        for i in range(steady_jobs(rate))))
    send_create_commands(settings, f"parts{run.logical}-burst", (
        JobSpec(name=f"burst-{i}", tenant=BURST_TENANT, queue="default", handler="echo",
                at=_at(due))
        for i in range(run.burst_jobs)))
    # Jobs still arriving within the lookahead would be fired late: only until then.
    until = start - lead - 1
    for tenant, wanted in ((STEADY_TENANT, steady_jobs(rate)), (BURST_TENANT, run.burst_jobs)):
        seen, _ = wait_for_jobs(settings.postgres_dsn, tenant, wanted, until)
        if seen < wanted:
            run.notes.append(f"only {seen:,} of {wanted:,} {tenant} jobs were in place "
                             f"{lead + 1:.0f} s before the window")
    return start, due


def _run_layout(stack_settings: Settings, options: BenchOptions, log_root: Path,
                run: LayoutRun) -> None:
    settings = _settings(stack_settings, options, run.logical, run.kafka)
    service = CronlogService(settings, log_root / f"cronlog-partitions-{run.logical}",
                             schedulers=options.schedulers, workers=options.workers)
    servers = server_pids(stack_settings)
    cpu_window = RoleCpuWindow(lambda: {**service.pids(), **servers}, CPU_TAIL_SECONDS)
    # Every-minute and one-off jobs are pre-enqueued the sparse lookahead ahead (when on).
    lead = max(settings.lookahead, settings.sparse_lookahead).total_seconds()
    seconds, rate = run.steady_seconds, run.steady_rate
    try:
        service.start()
        start, due = _create(settings, options, run, lead)
        cpu_window.between(start - lead - 1.0, start + seconds + CPU_TAIL_SECONDS)
        deadline = start + seconds + options.max_wait
        history.wait_started(settings, rate * seconds + run.burst_jobs, deadline,
                             f"partitions {run.label}", service.check_alive)
        history.wait_settled(settings, limit=max(60.0, options.max_wait))
        start_us = int(start * _US)
        run.steady = steady_figures(rate, start_us, seconds, rate * seconds,
                                    history.first_attempt_starts(settings, STEADY_TENANT),
                                    int(deadline * _US))
        run.burst = burst_figures(int(due * _US), run.burst_jobs,
                                  history.first_attempt_starts(settings, BURST_TENANT),
                                  int((due + options.max_wait) * _US))
        run.runs = run.steady.started + run.burst.started
        cpu = cpu_window.end(run.runs)
        run.notes += cpu_notes(cpu, servers)
        if cpu is not None:
            run.window_seconds = cpu.window_seconds
            run.core_seconds = cpu.core_seconds
            run.per_1k_runs = per_thousand(cpu.core_seconds, run.runs)
    finally:
        cpu_window.stop()
        service.stop()


def run_partitions(stack_settings: Settings, options: BenchOptions,
                   log_root: Path) -> PartitionsResult:
    runs = [LayoutRun(logical, kafka, options.partitions_steady_rate,
                      options.partitions_seconds, options.partitions_burst_jobs)
            for logical, kafka in layouts(options.partitions_layouts, options.partitions_kafka)]
    notes: list[str] = []
    for run in runs:
        say(f"== partitions: {run.logical:,} logical over {run.kafka:,} Kafka partitions")
        try:
            _run_layout(stack_settings, options, log_root, run)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            # The other layouts' figures are still worth having.
            run.error = f"{type(exc).__name__}: {exc}"
            say(f"!! partitions {run.label}: {run.error}")
        for note in run.notes:
            say(f"   note: {note}")
    with_ratios(runs)
    failed = [r.label for r in runs if r.error]
    if failed:
        notes.append(f"layouts without figures: {', '.join(failed)}")
    return PartitionsResult("cronlog", runs, SOURCE.format(tail=CPU_TAIL_SECONDS),
                            f"{LAG_SOURCE}; the steady and burst jobs are tenants apart",
                            notes=notes)
