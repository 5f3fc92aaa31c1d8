"""Three handlers, as a team would write its own.

- `example.report`: counts the words of a text, a plain function;
- `example.pause`: waits without holding its thread, an `async def`, until cancelled;
- `example.lookup`: gives up on a key that cannot exist, without retries (NonRetryable);
- `example.progress`: a long job in steps, heartbeating how far it got after each.
"""

from __future__ import annotations

import asyncio

from cronlog.sdk import Context, NonRetryable, handler


@handler("example.report")
def report(ctx: Context) -> dict[str, object]:
    """Payload {"text": "..."}: the words of the text, counted."""
    text = str((ctx.json() or {}).get("text", ""))
    ctx.logger.info("counting %d characters", len(text))
    return {"words": len(text.split()), "attempt": ctx.attempt, "run_id": str(ctx.run_id)}


@handler("example.pause")
async def pause(ctx: Context) -> str:
    """Payload {"seconds": n}: waits n seconds (an attempt's cancel or timeout ends it)."""
    seconds = float((ctx.json() or {}).get("seconds", 1))
    await asyncio.sleep(seconds)
    return f"paused {seconds:g} s"


@handler("example.lookup")
def lookup(ctx: Context) -> bytes:
    """Payload {"key": "..."}: a key with a space can never be found: no retry helps."""
    key = str((ctx.json() or {}).get("key", ""))
    if " " in key or not key:
        raise NonRetryable(f"no such key {key!r}")
    return key.upper().encode()


@handler("example.progress")
def progress(ctx: Context) -> dict[str, int]:
    """Payload {"files": n, "seconds_each": s}: copies n files (here: waits s seconds for
    each), heartbeating after each one how many are done: the attempt stays alive past its
    heartbeat timeout however long the copy takes, and GetRun shows the count. A cancel or
    the attempt's timeout stops it between two files."""
    payload = ctx.json() or {}
    files, seconds_each = int(payload.get("files", 3)), float(payload.get("seconds_each", 1))
    for done in range(1, files + 1):
        if ctx.cancelled.wait(seconds_each):
            raise NonRetryable(f"stopped after {done - 1} of {files} files")
        ctx.heartbeat({"copied": done, "of": files})
    return {"copied": files}
