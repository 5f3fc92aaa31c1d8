"""A handler that ignores being told to stop, so the worker has to stop it by force.

Loaded with CRONLOG_HANDLER_MODULES=tests.e2e.stubborn_handler. It writes what happened to
it into the file named by its payload's "marker": "started", "told" once the cancellation
is signalled, "stopped" when the worker interrupts it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry


def stubborn(ctx: HandlerContext) -> bytes:
    marker = Path(json.loads(ctx.payload)["marker"])

    def note(what: str) -> None:
        with marker.open("a") as out:
            out.write(what + "\n")

    note("started")
    told = False
    try:
        for _ in range(1200):  # two minutes at most, whatever happens
            if ctx.cancelled.is_set() and not told:
                told = True
                note("told")
            time.sleep(0.1)
    except BaseException:
        note("stopped")
        raise
    return b"finished anyway"


def register(registry: HandlerRegistry) -> None:
    registry.register("stubborn", stubborn)
