"""A user's module of handlers: one sync, one async, one that gives up, one that misbehaves."""

from __future__ import annotations

import asyncio

from cronlog.sdk import Context, NonRetryable, handler


@handler("sample.greet")
def greet(ctx: Context) -> dict[str, object]:
    ctx.logger.info("greeting")
    return {"hello": (ctx.json() or {}).get("name", "world"), "attempt": ctx.attempt}


@handler("sample.wait")
async def wait(ctx: Context) -> str:
    await asyncio.sleep(float((ctx.json() or {}).get("seconds", 0)))
    return "waited"


@handler("sample.give_up")
def give_up(ctx: Context) -> None:
    raise NonRetryable("the target does not exist")


@handler("sample.odd_output")
def odd_output(ctx: Context) -> object:
    return object()


def not_a_handler(ctx: Context) -> bytes:
    return b""


# What sample.probe was given, for the test to look at.
SEEN: list[Context] = []


@handler("sample.probe")
def probe(ctx: Context) -> None:
    SEEN.append(ctx)
