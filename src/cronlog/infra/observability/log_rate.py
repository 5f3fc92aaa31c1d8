"""Log lines at a bounded rate: what a caller can cause at will (a refused token, a refused
sign-in) is worth a line, but not a line per attempt, or a flood of attempts floods the log
and the disk behind it. Each LogRate lets `limit` lines through per `interval` seconds and
counts the rest; the next line let through says how many were not written."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

# Refusals: ten lines a minute in all, whoever causes them.
REFUSALS_PER_INTERVAL = 10
REFUSAL_INTERVAL_SECONDS = 60.0


class LogRate:
    """A fixed window: at most `limit` admitted lines in each `interval` seconds since the
    window's first line. O(1) per line; thread-safe."""

    def __init__(self, limit: int = REFUSALS_PER_INTERVAL,
                 interval: float = REFUSAL_INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1 or interval <= 0:
            raise ValueError("a log rate needs a positive limit and interval")
        self._limit = limit
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._window_start: float | None = None
        self._admitted = 0
        self._dropped = 0

    def admit(self) -> int | None:
        """None: do not write this line. A number: write it, saying that many were not
        written since the last line that was."""
        now = self._clock()
        with self._lock:
            if self._window_start is None or now - self._window_start >= self._interval:
                self._window_start = now
                self._admitted = 0
            if self._admitted >= self._limit:
                self._dropped += 1
                return None
            self._admitted += 1
            dropped, self._dropped = self._dropped, 0
            return dropped

    def log(self, logger: logging.Logger, level: int, message: str, *args: object) -> bool:
        """Writes the line if admitted (with the count left out before it); whether it did."""
        dropped = self.admit()
        if dropped is None:
            return False
        if dropped:
            logger.log(level, message + " (%d more like it not logged, at most %d a %g s)",
                       *args, dropped, self._limit, self._interval)
        else:
            logger.log(level, message, *args)
        return True
