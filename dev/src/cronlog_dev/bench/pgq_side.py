"""The pgqueuer side: its schema in its own database, its worker process, its producer."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import asyncpg
from pgqueuer import AsyncpgDriver, Queries

from cronlog_dev.bench.pgq_worker import ENTRYPOINT
from cronlog_dev.bench.stack import create_database, unique_name
from cronlog_dev.bench.stats import Start

# Warm-up jobs go to an entrypoint no worker serves, far in the future: they only time
# the inserts, and never run.
WARMUP_ENTRYPOINT = "bench_warmup"
_CHUNK = 1000


class WorkerDied(RuntimeError):
    """The pgqueuer worker exited while the workload ran."""


def install_database(base_dsn: str, workload: str) -> str:
    dsn = create_database(base_dsn, unique_name(f"pgq_{workload}"))
    subprocess.run([sys.executable, "-m", "pgqueuer", "--pg-dsn", dsn, "install"],
                   check=True, capture_output=True, timeout=120)
    return dsn


class PgqWorker:
    def __init__(self, dsn: str, log_dir: Path, batch_size: int) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.out = log_dir / "pgqueuer-starts.txt"
        self._ready = log_dir / "pgqueuer-worker.ready"
        self._log = log_dir / "pgqueuer-worker.log"
        self._dsn = dsn
        self._batch_size = batch_size
        self.proc: subprocess.Popen[bytes] | None = None
        self._offset = 0
        self._starts: list[Start] = []
        self._partial = b""

    def start(self, timeout: float = 60.0) -> None:
        for f in (self.out, self._ready):
            f.unlink(missing_ok=True)
        with self._log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cronlog_dev.bench.pgq_worker", "--dsn", self._dsn,
                 "--out", str(self.out), "--ready", str(self._ready),
                 "--batch-size", str(self._batch_size)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not self._ready.exists():
            self.check_alive()
            if time.monotonic() > deadline:
                raise WorkerDied(f"pgqueuer worker not ready in {timeout:.0f}s; see {self._log}")
            time.sleep(0.1)

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise WorkerDied(f"pgqueuer worker exited with {self.proc.returncode}; "
                             f"see {self._log}")

    def starts(self) -> list[Start]:
        """Every start the worker has written so far (read on from where it left off)."""
        if self.out.exists():
            with self.out.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
            self._offset += len(chunk)
            data = self._partial + chunk
            *complete, self._partial = data.split(b"\n")
            for line in complete:
                due, started = line.split()
                self._starts.append(Start(int(due), int(started)))
        return self._starts

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Producer:
    """Enqueues jobs through pgqueuer's own Queries.enqueue, in batches of _CHUNK."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None
        self._queries: Queries | None = None

    async def open(self) -> None:
        self._conn = await asyncpg.connect(self._dsn)
        self._queries = Queries(AsyncpgDriver(self._conn))

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()

    async def enqueue(self, count: int, due: float, entrypoint: str = ENTRYPOINT) -> None:
        """count jobs due at the epoch second `due`. pgqueuer takes execute_after as a delay
        from the database's now(); the delay is taken again for every chunk, so each chunk
        lands within a few milliseconds of `due` (the handler measures against what
        pgqueuer stored, not against `due`)."""
        assert self._queries is not None, "open() first"
        left = count
        while left:
            n = min(_CHUNK, left)
            delay = timedelta(seconds=due - time.time())
            await self._queries.enqueue([entrypoint] * n, [None] * n, [0] * n, [delay] * n)
            left -= n

