"""The burst and steady workloads on pgqueuer, on the same Postgres server as cronlog's."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from pathlib import Path

from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.pgq_side import WARMUP_ENTRYPOINT, PgqWorker, Producer, install_database
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.results import BurstResult, Creation, SteadyResult
from cronlog_dev.bench.rss import RssSampler
from cronlog_dev.bench.stats import burst_figures, steady_figures
from cronlog_dev.bench.timing import plan_due

LAG_SOURCE = ("the no-op handler itself: its first instant minus the job's execute_after "
              "as pgqueuer stored it")
_US = 1_000_000
MIN_LEAD = 10.0
# The steady producer enqueues each second's jobs this long before they are due, as
# cronlog's owner pre-enqueues runs (its lookahead), so insert time is not counted as lag.
STEADY_LEAD = 1.0


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


async def _wait_started(worker: PgqWorker, expected: int, deadline: float, what: str) -> None:
    last_report = 0.0
    while time.time() < deadline:
        worker.check_alive()
        started = len(worker.starts())
        if started >= expected:
            return
        if time.time() - last_report >= 10:
            say(f"[pgqueuer] {what}: {started:,} of {expected:,} started")
            last_report = time.time()
        await asyncio.sleep(0.5)


async def _warm_up(producer: Producer, count: int) -> float:
    start = time.time()
    await producer.enqueue(count, start + 86_400, WARMUP_ENTRYPOINT)
    return count / max(time.time() - start, 1e-3)


async def _burst(worker: PgqWorker, producer: Producer, options: BenchOptions,
                 sampler: RssSampler) -> BurstResult:
    count = options.burst_jobs
    rate = await _warm_up(producer, min(max(count // 20, 200), 2000))
    now = time.time()
    due = plan_due(now, count, rate, MIN_LEAD, options.max_create)
    say(f"[pgqueuer] warm-up enqueued {rate:,.0f} jobs/s; enqueuing {count:,} jobs due in "
        f"{due - now:.0f} s")
    await producer.enqueue(count, due)
    seconds = time.time() - now
    in_place = count if time.time() < due else 0
    say(f"[pgqueuer] {count:,} jobs enqueued in {seconds:.1f} s")
    deadline = due + options.max_wait
    await _wait_started(worker, count, deadline, "burst")
    await asyncio.sleep(0.5)  # the worker writes its starts down a few times a second
    rss = sampler.stop()
    figures = burst_figures(int(due * _US), count, worker.starts(), int(deadline * _US))
    notes = [] if figures.started >= count else [
        f"{figures.started:,} of {count:,} started within {options.max_wait:.0f} s of T; the "
        f"lag figures cover those only (the others waited longer than {options.max_wait:.0f} s)"]
    if not in_place:
        notes.append("enqueuing ended after T")
    return BurstResult("pgqueuer", _at(due), options.max_wait,
                       Creation(count, in_place, seconds, count / seconds, due - now),
                       figures, LAG_SOURCE, rss, notes)


async def _steady(worker: PgqWorker, producer: Producer, options: BenchOptions,
                  sampler: RssSampler) -> SteadyResult:
    rate, seconds = options.steady_rate, options.steady_seconds
    start = float(math.ceil(time.time() + 3))
    late = 0
    say(f"[pgqueuer] steady: {rate:,} jobs due every second for {seconds} s")
    for second in range(seconds):
        due = start + second
        await asyncio.sleep(max(0.0, due - STEADY_LEAD - time.time()))
        worker.check_alive()
        await producer.enqueue(rate, due)
        if time.time() > due:
            late += 1
    deadline = start + seconds + options.max_wait
    await _wait_started(worker, rate * seconds, deadline, "steady")
    await asyncio.sleep(0.5)
    rss = sampler.stop()
    figures = steady_figures(rate, int(start * _US), seconds, rate * seconds, worker.starts(),
                             int(deadline * _US))
    notes = [f"the producer finished {late} of {seconds} seconds' batches after they were due"]
    if figures.started < figures.due:
        notes.append(f"{figures.started:,} of {figures.due:,} due runs started by "
                     f"{options.max_wait:.0f} s after the window; the lag figures cover those only")
    return SteadyResult("pgqueuer", _at(start), options.max_wait,
                        Creation(rate * seconds, rate * seconds, None, None, STEADY_LEAD),
                        figures, LAG_SOURCE, rss, notes)


def run(workload: str, base_dsn: str, options: BenchOptions,
        log_root: Path) -> BurstResult | SteadyResult:
    dsn = install_database(base_dsn, workload)
    worker = PgqWorker(dsn, log_root / f"pgqueuer-{workload}", options.pgq_batch_size)
    sampler = RssSampler()

    async def go() -> BurstResult | SteadyResult:
        producer = Producer(dsn)
        await producer.open()
        try:
            if workload == "burst":
                return await _burst(worker, producer, options, sampler)
            return await _steady(worker, producer, options, sampler)
        finally:
            await producer.close()

    try:
        worker.start()
        assert worker.proc is not None
        sampler.watch("pgqueuer-worker", worker.proc.pid)
        sampler.start()
        return asyncio.run(go())
    finally:
        sampler.stop()
        worker.stop()
