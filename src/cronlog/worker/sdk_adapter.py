"""A cronlog.sdk handler as the worker runs it: its Context built from the dispatch, a
coroutine run to its end or its cancellation, its return value made the attempt's output."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

from cronlog.domain.policies import NON_RETRYABLE
from cronlog.sdk import Context, NonRetryable
from cronlog.sdk.values import as_bytes
from cronlog.worker.handler_context import HandlerContext, HandlerFailed

# How often a coroutine handler's run checks whether its attempt was cancelled.
CANCEL_CHECK_SECONDS = 0.05


def output_of(name: str, value: object) -> bytes:
    """Bytes as they are, text as UTF-8, None as nothing, anything else as JSON."""
    try:
        return as_bytes(value)
    except (TypeError, ValueError) as exc:
        raise HandlerFailed(f"handler {name!r} returned a {type(value).__name__}, which is "
                            f"not bytes, text or JSON ({exc})", "OutputError") from exc


async def _until_cancelled(coroutine: Coroutine[Any, Any, Any], context: Context) -> Any:
    task = asyncio.ensure_future(coroutine)
    while not task.done():
        if context.cancelled.is_set():
            task.cancel()
            break
        await asyncio.wait({task}, timeout=CANCEL_CHECK_SECONDS)
    try:
        return await task
    except asyncio.CancelledError:
        raise HandlerFailed("cancelled", "Cancelled") from None


class SdkHandler:
    """The worker's Handler for one @handler function."""

    def __init__(self, name: str, function: Callable[[Context], Any],
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.name = name
        self.function = function
        self._is_async = inspect.iscoroutinefunction(function)
        self._now = now

    def __call__(self, ctx: HandlerContext) -> bytes:
        context = Context(self.name, ctx, self._now() + timedelta(seconds=ctx.timeout_seconds))
        try:
            if self._is_async:
                # Its own event loop on the handler's thread: attempts do not share one.
                value = asyncio.run(_until_cancelled(self.function(context), context))
            else:
                value = self.function(context)
        except NonRetryable as exc:
            raise HandlerFailed(str(exc) or "the handler gave up", NON_RETRYABLE) from exc
        return output_of(self.name, value)

    def __repr__(self) -> str:
        return f"SdkHandler({self.name!r}, {self.function!r})"
