"""The attempts whose handler runs on this worker: heartbeated while they run, told to
stop (cancelled, or past their timeout) and stopped by force after a grace period; and
the attempts started lately, so that a dispatch handed back after a lapsed session is not
started twice."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from datetime import datetime, timedelta

from cronlog.domain.catalogue import Report
from cronlog.log_fields import log_fields
from cronlog.ports import Clock
from cronlog.worker.attempt_stop import raise_in_thread
from cronlog.worker.execution import RunningAttempt
from cronlog.worker.ports import ReportSink

# The worker's log lines keep one logger name, whichever part of it writes them.
log = logging.getLogger("cronlog.worker.runtime")

TIMED_OUT = "ran past its timeout"

Key = tuple[str, int]


class RunningAttempts:
    def __init__(self, worker_id: str, reports: ReportSink, clock: Clock,
                 heartbeat_interval: timedelta, cancel_grace: timedelta,
                 started_memory: int) -> None:
        self._worker_id = worker_id
        self._reports = reports
        self._clock = clock
        self._heartbeat_interval = heartbeat_interval
        self._last_heartbeat = clock.now()
        self._cancel_grace = cancel_grace
        # Handler threads end their attempts; the loop reads them.
        self._lock = threading.Lock()
        # Attempts whose handler is running, by (run_id, attempt).
        self._running: dict[Key, RunningAttempt] = {}
        # Attempts this worker started lately. After its group session lapses (a broker
        # restart longer than the session timeout) the group hands its partitions back
        # from the last committed offsets: what it already started is not started again.
        self._started: OrderedDict[Key, None] = OrderedDict()
        self._started_limit = started_memory

    def __len__(self) -> int:
        return len(self._running)

    def started_here(self, key: Key) -> bool:
        with self._lock:
            return key in self._started

    def begin(self, running: RunningAttempt) -> None:
        with self._lock:
            self._running[running.key] = running
            self._started[running.key] = None
            if len(self._started) > self._started_limit:
                self._started.popitem(last=False)

    def end(self, key: Key) -> None:
        """From the handler's thread, once its handler has returned or been stopped."""
        with self._lock:
            self._running.pop(key, None)

    def get(self, key: Key) -> RunningAttempt | None:
        with self._lock:
            return self._running.get(key)

    def heartbeat(self) -> None:
        now = self._clock.now()
        if now - self._last_heartbeat < self._heartbeat_interval:
            return
        self._last_heartbeat = now
        with self._lock:
            # An attempt told to stop has ended for the owner already: no more heartbeats.
            running = [(key, r.job_id) for key, r in self._running.items()
                       if not r.stop_reason.startswith("cancelled")]
        # One message per running attempt, sent together: the producer batches them.
        for (run_id, attempt), job_id in running:
            self._reports.send(job_id, Report.HEARTBEAT, {
                "run_id": run_id, "job_id": job_id, "attempt": attempt,
                "worker": self._worker_id, "at": now})

    def tell_to_stop(self, running: RunningAttempt, reason: str) -> None:
        if running.stop_at is not None:
            return
        running.stop_reason = reason
        running.stop_at = self._clock.now() + self._cancel_grace
        running.context.cancelled.set()
        log.info("told attempt %d of run %s to stop (%s)", running.context.attempt,
                 running.context.run_id, reason,
                 extra={"run_id": str(running.context.run_id), "job_id": running.job_id,
                        "attempt": running.context.attempt})

    def stop_overdue(self) -> None:
        """Handlers past their timeout are told to stop; those told that have not stopped
        within the grace period are stopped by force."""
        now: datetime = self._clock.now()
        with self._lock:
            running = list(self._running.values())
        for r in running:
            if r.stop_at is None and r.timeout_at <= now:
                self.tell_to_stop(r, TIMED_OUT)
            elif r.stop_at is not None and r.stop_at <= now and r.thread_id is not None:
                log.warning("attempt %d of run %s did not stop within %s: stopping it",
                            r.context.attempt, r.context.run_id, self._cancel_grace,
                            extra=log_fields(job_id=r.job_id, run_id=r.context.run_id,
                                             attempt=r.context.attempt))
                raise_in_thread(r.thread_id)
                # Once is enough; the next try, if it is still there, is another grace later.
                r.stop_at = now + self._cancel_grace
