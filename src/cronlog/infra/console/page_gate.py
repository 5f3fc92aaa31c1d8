"""The console's pages in progress, shared fairly among tenants."""

from __future__ import annotations

import threading
import time

import anyio

from cronlog.console.fair_share import ShareLedger


class PageGate:
    """The pages in progress, at most `share` of `capacity` for one tenant (a session's
    share_key): a tenant opening pages faster than they finish waits (without a thread) for
    one of its own to end, and the others' pages go on."""

    def __init__(self, capacity: int, share: int, poll_seconds: float = 0.02) -> None:
        self._ledger = ShareLedger(capacity, share)
        self._lock = threading.Lock()
        self._poll = poll_seconds

    def try_enter(self, key: str) -> bool:
        with self._lock:
            return self._ledger.take(key)

    async def enter(self, key: str, timeout: float) -> bool:
        """Whether a place was had within timeout seconds."""
        deadline = time.monotonic() + timeout
        while not self.try_enter(key):
            if time.monotonic() >= deadline:
                return False
            # Polled rather than awaited on a condition: no event-loop-bound state, and a
            # wait here is the exception (a tenant over its share).
            await anyio.sleep(self._poll)
        return True

    def leave(self, key: str) -> None:
        with self._lock:
            self._ledger.give(key)

    def held(self, key: str) -> int:
        with self._lock:
            return self._ledger.held(key)
