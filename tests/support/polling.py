"""Bounded waiting for asynchronous results: tests never sleep blindly."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TimedOut(AssertionError):
    pass


def patience() -> float:
    """How many times longer than it says a wait may take before it fails. make test runs the
    suites that assert no timing as SCHED_IDLE processes (scripts/test-suites.sh), which get
    the CPU only when the measured modules leave it: a wait there bounds a failure, it does
    not measure anything, so those streams set CRONLOG_TEST_PATIENCE."""
    value = float(os.environ.get("CRONLOG_TEST_PATIENCE", "1") or 1)
    if not 1 <= value <= 10:
        raise ValueError(f"CRONLOG_TEST_PATIENCE must be within 1..10, got {value}")
    return value


def wait_for(probe: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.2) -> T:
    """Calls probe until it returns something truthy, or fails naming what never happened
    (after timeout times patience())."""
    timeout *= patience()
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimedOut(f"{what}: not reached within {timeout:.0f}s (last: {last!r})")
        time.sleep(interval)


def after_each(action: Callable[[], object], probe: Callable[[], T]) -> Callable[[], T]:
    """A probe for wait_for that does `action` (a loop's next step) before each look."""
    def probed() -> T:
        action()
        return probe()
    return probed
