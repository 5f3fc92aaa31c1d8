"""The handlers every worker has: echo, sleep, fail, http and command."""

from __future__ import annotations

import json
from collections.abc import Mapping

from cronlog.outbound.policy import OutboundPolicy
from cronlog.worker.command_handler import CommandHandler
from cronlog.worker.command_policy import CommandPolicy
from cronlog.worker.handler_context import (
    Handler,
    HandlerContext,
    HandlerFailed,
    PayloadError,
    json_payload,
)
from cronlog.worker.http_handler import HttpHandler


def echo(ctx: HandlerContext) -> bytes:
    return ctx.payload


def sleep(ctx: HandlerContext) -> bytes:
    args = json_payload("sleep", ctx.payload)
    seconds = args.get("seconds", 1)
    if not isinstance(seconds, int | float) or seconds < 0:
        raise PayloadError("sleep", "'seconds' must be a non-negative number")
    if ctx.cancelled.wait(float(seconds)):
        raise HandlerFailed("cancelled while sleeping", "Cancelled")
    return json.dumps({"slept": seconds}).encode()


def fail(ctx: HandlerContext) -> bytes:
    args = json_payload("fail", ctx.payload)
    times = args.get("times", 1)
    if not isinstance(times, int) or times < 0:
        raise PayloadError("fail", "'times' must be a non-negative integer")
    if ctx.attempt <= times:
        raise HandlerFailed(f"failing on purpose: attempt {ctx.attempt} of the first {times}",
                            "DeliberateFailure")
    return json.dumps({"succeeded_on_attempt": ctx.attempt}).encode()


def http(ctx: HandlerContext) -> bytes:
    """POSTs `body` to `url` (payload JSON), with the idempotency key in a header, under the
    default outbound policy (public addresses only). Workers use the policy of their
    configuration instead: see HandlerRegistry."""
    return HttpHandler(OutboundPolicy())(ctx)


def command(ctx: HandlerContext) -> bytes:
    """Refuses every program, naming the setting that allows it: a worker allows commands
    only by its operator's CRONLOG_COMMAND_ALLOW (see HandlerRegistry)."""
    return CommandHandler(CommandPolicy())(ctx)


BUILT_IN_HANDLERS: Mapping[str, Handler] = {"echo": echo, "sleep": sleep, "fail": fail,
                                             "http": http, "command": command}
