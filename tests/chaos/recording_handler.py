"""A handler for failure tests: records each execution, then works for a while.

Loaded into workers with CRONLOG_HANDLER_MODULES=tests.chaos.recording_handler. Each worker
process appends to its own file under CRONLOG_CHAOS_RECORD_DIR, so a worker killed with -9
keeps what it wrote (the page cache survives a process kill).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from cronlog.commands.handlers import HandlerContext, HandlerRegistry

_lock = threading.Lock()


def record(ctx: HandlerContext) -> bytes:
    folder = Path(os.environ["CRONLOG_CHAOS_RECORD_DIR"])
    line = f"{ctx.idempotency_key} {ctx.attempt}\n"
    with _lock, (folder / f"worker-{os.getpid()}.log").open("a") as out:
        out.write(line)
        out.flush()
    seconds = float(json.loads(ctx.payload or b"{}").get("seconds", 0.2))
    ctx.cancelled.wait(seconds)
    return b"recorded"


def register(registry: HandlerRegistry) -> None:
    registry.register("record", record)
