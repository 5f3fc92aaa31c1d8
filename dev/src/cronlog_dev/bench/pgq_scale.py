"""The scale workload on pgqueuer: a million jobs in its table, then a burst beside them.

cronlog's side registers a million jobs on 1,024 partitions; pgqueuer has no schedules of
that kind, so the nearest thing it holds is a million queued jobs due later. They go in
through pgqueuer's own batched enqueue (the rate is the bulk figure), all on the entrypoint
the bench's worker serves, due between one and twenty-five hours ahead: the worker's
dequeue has to find the burst's jobs among them, as it would in a queue that holds a day
of scheduled work. Then scale_burst_jobs jobs due at one second T, run by the same no-op
worker as the burst workload.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import asyncpg
import psycopg
from pgqueuer import AsyncpgDriver, Queries

from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.pgq_side import PgqWorker, install_database
from cronlog_dev.bench.pgq_worker import ENTRYPOINT
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.stack import dsn_of
from cronlog_dev.bench.stats import BurstFigures, burst_figures
from cronlog_dev.bench.timing import plan_due

# Rows per enqueue call. On this machine (2 cores, shared) pgqueuer's batched enqueue ran
# 57,600-65,400 rows/s for any batch from 1,000 to 50,000 rows (60,000 rows each, one
# connection): the batch size hardly matters past a thousand, so a middling one.
ENQUEUE_BATCH = 10_000
# The background jobs are due from an hour to twenty-five hours ahead, spread evenly: far
# enough that none becomes due while the workload runs.
BACKGROUND_FROM = timedelta(hours=1)
BACKGROUND_SPAN = timedelta(days=1)
MIN_LEAD = 10.0
ANALYZE_NOTE = ("the background rows are on the entrypoint the worker serves, due 1-25 h ahead; "
                "the table was analysed after they went in, before the burst")
PROGRESS_EVERY = 10.0
_US = 1_000_000
_MIB = 1024 * 1024
# pgqueuer's tables under its default names (pgqueuer install without a prefix): the queue,
# and the log it writes a 'queued' row to for every job enqueued.
QUEUE_TABLE = "pgqueuer"
LOG_TABLE = "pgqueuer_log"
_SIZES = ("SELECT pg_total_relation_size($1::regclass), pg_total_relation_size($2::regclass)")
# The two indexes pgqueuer's dequeue can walk to find due jobs of an entrypoint: in
# (priority, id) order, past every queued row that is not due yet, or by execute_after,
# reading every due row to sort them by priority and id. Which one the planner takes
# depends on the table's statistics; how many entries each read tells where the time went.
DEQUEUE_INDEXES = (f"{QUEUE_TABLE}_ep_prio_id_idx", f"{QUEUE_TABLE}_ep_ea_idx")
_INDEX_READS = ("SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes "
                "WHERE indexrelname = ANY($1::text[])")


@dataclass
class PgqScaleResult:
    rows_enqueued: int            # background rows put in pgqueuer's table (options.scale_jobs)
    enqueue_seconds: float
    enqueue_per_second: float     # bulk enqueue rate (rows/s) through pgqueuer's own enqueue API, batched
    table_mb: float               # pgqueuer's tables + indexes after the enqueue (pg_total_relation_size)
    burst_jobs: int               # options.scale_burst_jobs due at one second T, the rows above in place
    burst_started: int
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_max_ms: float | None
    burst_all_started_seconds: float | None   # T -> last start, None if not all started
    notes: list[str]


def batches(total: int, size: int) -> Iterator[int]:
    """The row counts of the enqueue calls that put total rows in, size at most each."""
    if size <= 0:
        raise ValueError(f"batch size must be positive, got {size}")
    left = total
    while left > 0:
        n = min(size, left)
        yield n
        left -= n


def background_delays(first: int, count: int, total: int) -> list[timedelta]:
    """Delays of the background rows first..first+count-1 of total, spread evenly over
    BACKGROUND_SPAN from BACKGROUND_FROM on."""
    step = BACKGROUND_SPAN / max(total, 1)
    return [BACKGROUND_FROM + step * i for i in range(first, first + count)]


def mebibytes(size_bytes: int) -> float:
    return round(size_bytes / _MIB, 1)


def burst_notes(figures: BurstFigures, max_wait: float, enqueue_ended_after_t: bool,
                burst_enqueue_seconds: float) -> list[str]:
    notes = [f"the burst's {figures.expected:,} jobs went in in {burst_enqueue_seconds:.1f} s"]
    if figures.started < figures.expected:
        notes.append(f"{figures.started:,} of {figures.expected:,} started within "
                     f"{max_wait:.0f} s of T; the lag figures cover those only")
    if enqueue_ended_after_t:
        notes.append("enqueuing the burst ended after T: its last jobs were late before "
                     "any worker could see them")
    return notes


def index_reads_note(reads: dict[str, tuple[int, int]]) -> str:
    """reads: index name -> (scans, entries read) over the burst."""
    parts = []
    for name in DEQUEUE_INDEXES:
        scans, entries = reads.get(name, (0, 0))
        each = f", {entries // scans:,} a scan" if scans else ""
        parts.append(f"{name} {scans:,} scans, {entries:,} entries read{each}")
    return "pgqueuer's dequeue during the burst: " + "; ".join(parts)


def scale_result(rows: int, enqueue_seconds: float, queue_bytes: int, log_bytes: int,
                 figures: BurstFigures, notes: list[str]) -> PgqScaleResult:
    """The workload's figures; table_mb counts both of pgqueuer's tables, since every
    enqueued job writes a row to each."""
    size_note = (f"table_mb is {QUEUE_TABLE} {mebibytes(queue_bytes):,} MB + {LOG_TABLE} "
                 f"{mebibytes(log_bytes):,} MB, indexes included, after the bulk enqueue")
    return PgqScaleResult(
        rows_enqueued=rows, enqueue_seconds=round(enqueue_seconds, 2),
        enqueue_per_second=round(rows / enqueue_seconds, 1) if enqueue_seconds > 0 else 0.0,
        table_mb=mebibytes(queue_bytes + log_bytes), burst_jobs=figures.expected,
        burst_started=figures.started, lag_p50_ms=figures.lag.p50_ms,
        lag_p99_ms=figures.lag.p99_ms, lag_max_ms=figures.lag.max_ms,
        burst_all_started_seconds=figures.seconds_to_last_start,
        notes=[size_note, *notes])


async def _enqueue_background(queries: Queries, total: int) -> float:
    started = time.monotonic()
    last_report = started
    done = 0
    for n in batches(total, ENQUEUE_BATCH):
        delays: list[timedelta | None] = [*background_delays(done, n, total)]
        await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n, delays)
        done += n
        if time.monotonic() - last_report >= PROGRESS_EVERY:
            last_report = time.monotonic()
            say(f"[pgqueuer] scale: {done:,} of {total:,} rows enqueued "
                f"({done / (last_report - started):,.0f}/s)")
    return time.monotonic() - started


async def _enqueue_due(queries: Queries, count: int, due: float) -> None:
    """count jobs due at the epoch second `due`; pgqueuer takes execute_after as a delay from
    the database's now(), so the delay is taken again for every batch (as pgq_side's
    Producer does)."""
    for n in batches(count, ENQUEUE_BATCH):
        delay = timedelta(seconds=due - time.time())
        await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n, [delay] * n)


async def _index_reads(conn: asyncpg.Connection) -> dict[str, tuple[int, int]]:
    await asyncio.sleep(1.0)
    rows = await conn.fetch(_INDEX_READS, list(DEQUEUE_INDEXES))
    return {r["indexrelname"]: (int(r["idx_scan"]), int(r["idx_tup_read"])) for r in rows}


async def _wait_started(worker: PgqWorker, expected: int, deadline: float) -> None:
    last_report = time.time()
    while time.time() < deadline:
        worker.check_alive()
        started = len(worker.starts())
        if started >= expected:
            return
        if time.time() - last_report >= PROGRESS_EVERY:
            say(f"[pgqueuer] scale burst: {started:,} of {expected:,} started")
            last_report = time.time()
        await asyncio.sleep(0.5)


async def _scale(dsn: str, options: BenchOptions, worker: PgqWorker) -> PgqScaleResult:
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        total = options.scale_jobs
        say(f"[pgqueuer] scale: enqueuing {total:,} jobs due 1-25 h ahead, "
            f"{ENQUEUE_BATCH:,} a call")
        seconds = max(await _enqueue_background(queries, total), 1e-3)
        say(f"[pgqueuer] scale: {total:,} rows in {seconds:.1f} s ({total / seconds:,.0f}/s)")
        # A queue that holds a million jobs has been analysed by autovacuum long since; the
        # bench's fresh table may not have been yet. Autovacuum may analyse it again during
        # the burst, as it would in production, and the planner may then walk the other
        # index: the notes say which one the dequeue read, and how much.
        await conn.execute(f"ANALYZE {QUEUE_TABLE}")
        queue_bytes, log_bytes = await conn.fetchrow(_SIZES, QUEUE_TABLE, LOG_TABLE)
        before = await _index_reads(conn)

        worker.start()
        count = options.scale_burst_jobs
        now = time.time()
        due = plan_due(now, count, total / seconds, MIN_LEAD, options.max_create)
        say(f"[pgqueuer] scale burst: enqueuing {count:,} jobs due in {due - now:.0f} s "
            f"beside the {total:,}")
        await _enqueue_due(queries, count, due)
        burst_seconds = time.time() - now
        late = time.time() >= due
        deadline = due + options.scale_max_wait
        await _wait_started(worker, count, deadline)
        await asyncio.sleep(0.5)  # the worker writes its starts down a few times a second
        figures = burst_figures(int(due * _US), count, worker.starts(), int(deadline * _US))
        # A backend sends its statistics when it is done with them, at the latest when its
        # connection closes: the worker's are complete once it has stopped.
        worker.stop()
        after = await _index_reads(conn)
        reads = {name: (after[name][0] - before.get(name, (0, 0))[0],
                        after[name][1] - before.get(name, (0, 0))[1]) for name in after}
        say(f"[pgqueuer] scale burst: {figures.started:,} of {count:,} started, p99 "
            f"{figures.lag.p99_ms} ms")
        return scale_result(total, seconds, queue_bytes, log_bytes, figures,
                            [ANALYZE_NOTE,
                             *burst_notes(figures, options.scale_max_wait, late, burst_seconds),
                             index_reads_note(reads)])
    finally:
        await conn.close()


def _drop_database(base_dsn: str, dsn: str) -> None:
    # A million rows and their log are a few hundred MB on the bench's Postgres; nothing
    # reads them once the figures are taken.
    database = dsn.rsplit("/", 1)[1]
    try:
        with psycopg.connect(dsn_of(base_dsn, "postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'.encode())
    except psycopg.Error as exc:
        # Left behind is only disk on the bench's own server; the figures stand.
        say(f"!! [pgqueuer] scale: could not drop database {database}: {exc}")


def run_pgq_scale(dsn: str, options: BenchOptions, log_root: Path) -> PgqScaleResult:
    """dsn: the bench's Postgres server; the workload makes its own database on it."""
    own = install_database(dsn, "scale")
    worker = PgqWorker(own, log_root / "pgqueuer-scale", options.pgq_batch_size)
    try:
        return asyncio.run(_scale(own, options, worker))
    finally:
        worker.stop()
        _drop_database(dsn, own)
