"""A handler for failure tests: records each execution, then works for a while.

Loaded into workers with CRONLOG_HANDLER_MODULES=tests.chaos.recording_handler. Each worker
process appends to its own files under CRONLOG_CHAOS_RECORD_DIR, so a worker killed with -9
keeps what it wrote (the page cache survives a process kill): `worker-PID.log` gets a line
when an execution starts, `worker-PID.done` one when it ends, so a test can tell which
worker is mid-run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry

_lock = threading.Lock()


def record(ctx: HandlerContext) -> bytes:
    folder = Path(os.environ["CRONLOG_CHAOS_RECORD_DIR"])
    _append(folder / f"worker-{os.getpid()}.log",
            f"{ctx.idempotency_key} {ctx.attempt} {time.time():.3f}\n")
    seconds = float(json.loads(ctx.payload or b"{}").get("seconds", 0.2))
    ctx.cancelled.wait(seconds)
    _append(folder / f"worker-{os.getpid()}.done", f"{ctx.idempotency_key} {ctx.attempt}\n")
    return b"recorded"


def _append(path: Path, line: str) -> None:
    with _lock, path.open("a") as out:
        out.write(line)
        out.flush()


def register(registry: HandlerRegistry) -> None:
    registry.register("record", record)
