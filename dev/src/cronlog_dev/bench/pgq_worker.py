"""The pgqueuer side's worker process: a no-op entrypoint that notes when it started.

Run as `python -m cronlog_dev.bench.pgq_worker --dsn DSN --out FILE`. For every job it
writes one line "due_us started_us" to FILE (the job's execute_after, as pgqueuer stored
it, and the handler's first instant), a few times a second, so the bench can follow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import uvloop
from pgqueuer import Job, PgQueuer

ENTRYPOINT = "bench_noop"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def micros(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1)


async def _flush_forever(lines: list[str], out: Path, stop: asyncio.Event) -> None:
    with out.open("a", encoding="ascii") as f:
        while True:
            if lines:
                batch = lines[:]
                del lines[:len(batch)]
                f.write("".join(batch))
                f.flush()
            if stop.is_set():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)


async def serve(dsn: str, out: Path, ready: Path, batch_size: int) -> None:
    connection = await asyncpg.connect(dsn)
    pgq = PgQueuer.from_asyncpg_connection(connection)
    lines: list[str] = []

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        started = time.time_ns() // 1000
        lines.append(f"{micros(job.execute_after)} {started}\n")

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, pgq.shutdown.set)
    out.touch()
    flusher = asyncio.create_task(_flush_forever(lines, out, pgq.shutdown))
    ready.touch()
    try:
        await pgq.qm.run(batch_size=batch_size)
    finally:
        pgq.shutdown.set()
        await flusher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ready", type=Path, required=True)
    parser.add_argument("--batch-size", type=int, default=100)
    args = parser.parse_args()
    # pgqueuer's own `run` command uses uvloop where it is installed; so does the bench.
    uvloop.run(serve(args.dsn, args.out, args.ready, args.batch_size))


if __name__ == "__main__":
    main()
