"""A page's time limit: the web adapter sets the deadline of the request it serves, and the
readers behind the page (the run history, the api's reads) give each call only what is left
of it. A context variable, so it follows the page into the thread that renders it."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "cronlog_console_page_deadline", default=None)


@contextmanager
def page_deadline(seconds: float, now: float | None = None) -> Iterator[float]:
    """Until the block ends, the current page must be done `seconds` from now (monotonic)."""
    deadline = (time.monotonic() if now is None else now) + seconds
    token = _deadline.set(deadline)
    try:
        yield deadline
    finally:
        _deadline.reset(token)


def time_left(default: float, now: float | None = None) -> float:
    """Seconds left of the current page's limit (negative once spent); `default` outside a
    page (a test, a command)."""
    deadline = _deadline.get()
    if deadline is None:
        return default
    return deadline - (time.monotonic() if now is None else now)
