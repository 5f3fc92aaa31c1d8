"""Bounded waiting for asynchronous results: tests never sleep blindly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TimedOut(AssertionError):
    pass


def wait_for(probe: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.2) -> T:
    """Calls probe until it returns something truthy, or fails naming what never happened."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimedOut(f"{what}: not reached within {timeout:.0f}s (last: {last!r})")
        time.sleep(interval)
