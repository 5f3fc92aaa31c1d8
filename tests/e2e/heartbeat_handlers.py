"""cronlog.sdk handlers for the heartbeat tests (test_heartbeats.py), loaded with
CRONLOG_WORKER_HANDLERS=tests.e2e.heartbeat_handlers. Each runs for the payload's "seconds"
(or until its attempt is cancelled)."""

from __future__ import annotations

from cronlog.sdk import Context, handler

# How often the beating handler heartbeats: well within any heartbeat timeout of the tests.
BEAT_SECONDS = 0.25


@handler("beating")
def beating(ctx: Context) -> str:
    """Heartbeats all along, with how many steps it has done as its progress."""
    steps = int(ctx.json()["seconds"] / BEAT_SECONDS)
    for step in range(1, steps + 1):
        if ctx.cancelled.wait(BEAT_SECONDS):
            return "cancelled"
        ctx.heartbeat({"step": step, "of": steps})
    return "done"


@handler("hanging")
def hanging(ctx: Context) -> str:
    """Heartbeats once, then hangs: its liveness is its own from then on."""
    ctx.heartbeat("about to hang")
    ctx.cancelled.wait(ctx.json()["seconds"])
    return "woke up"
