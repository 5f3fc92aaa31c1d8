"""What made a worker's starts late: the dispatch reached the worker after its due time
(upstream: the owner, the broker), or it waited at the worker (no free slot, or the loop
busy elsewhere). Logged as one line per interval with late starts, so an operator (or the
bench) can tell which side to look at; each start's lag and cause go to the worker's metrics
from the same reckoning, so the line and cronlog_worker_late_starts_total agree."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from cronlog.worker.ports import NoWorkerMetrics, WorkerMetrics

LATE = timedelta(milliseconds=500)
PHASES = ("poll", "start", "ship", "commit")


class StartLateness:
    def __init__(self, interval: timedelta = timedelta(seconds=10),
                 metrics: WorkerMetrics | None = None) -> None:
        self._interval = interval
        self._metrics = metrics or NoWorkerMetrics()
        self._since: datetime | None = None
        self._late_arrived = 0
        self._late_here = 0
        self._started = 0
        # The longest time one pass of each phase of the worker's loop took, in seconds.
        self._longest = dict.fromkeys(PHASES, 0.0)

    def started(self, due: datetime, arrived: datetime, started: datetime) -> None:
        self._started += 1
        lag = started - due
        cause = None
        if lag > LATE:
            if arrived > due:
                self._late_arrived += 1
                cause = "arrived_late"
            else:
                self._late_here += 1
                cause = "waited_here"
        self._metrics.run_started(max(0.0, lag.total_seconds()), cause)

    def phase_took(self, phase: str, began: float) -> None:
        took = time.monotonic() - began
        if took > self._longest[phase]:
            self._longest[phase] = took

    def report(self, now: datetime) -> str | None:
        """A line when the interval is over and some starts were late; the counts restart."""
        if self._since is None:
            self._since = now
        if now - self._since < self._interval:
            return None
        line = None
        if self._late_arrived or self._late_here:
            longest = ", ".join(f"{p} {s * 1000:.0f} ms" for p, s in self._longest.items())
            line = (f"{self._late_arrived + self._late_here} of {self._started} starts in the "
                    f"last {(now - self._since).total_seconds():.0f} s more than "
                    f"{LATE.total_seconds() * 1000:.0f} ms late: {self._late_arrived} reached "
                    f"this worker after their due time, {self._late_here} waited here; longest "
                    f"loop phases: {longest}")
        self._since = now
        self._late_arrived = self._late_here = self._started = 0
        self._longest = dict.fromkeys(PHASES, 0.0)
        return line
