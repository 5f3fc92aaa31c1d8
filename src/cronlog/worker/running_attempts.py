"""The attempts whose handler runs on this worker: heartbeated while they run, told to
stop (cancelled, or past their timeout) and stopped by force after a grace period; and
the attempts started lately, so that a dispatch handed back after a lapsed session is not
started twice."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from datetime import datetime, timedelta
from functools import partial

from cronlog.domain.catalogue import Report
from cronlog.log_fields import log_fields
from cronlog.ports import Clock
from cronlog.worker.attempt_stop import raise_in_thread
from cronlog.worker.execution import RunningAttempt
from cronlog.worker.ports import ReportSink

# The worker's log lines keep one logger name, whichever part of it writes them.
log = logging.getLogger("cronlog.worker.runtime")

TIMED_OUT = "ran past its timeout"
# A handler's heartbeats of one attempt go to the owner at most this often: a handler that
# heartbeats in a tight loop sends one report a second, with its latest details.
HANDLER_BEAT_EVERY = timedelta(seconds=1)
# The worker's own heartbeats of an attempt come at least this many times within its job's
# heartbeat timeout (and at most once a second), whatever the worker's interval: a job whose
# timeout is shorter than the interval would otherwise lose every attempt that outlived it.
BEATS_PER_TIMEOUT = 3


def heartbeat_pace(interval: timedelta, heartbeat_timeout: timedelta | None) -> timedelta:
    """How often the worker heartbeats an attempt whose handler does not."""
    if heartbeat_timeout is None:
        return interval
    return min(interval, max(HANDLER_BEAT_EVERY, heartbeat_timeout / BEATS_PER_TIMEOUT))

Key = tuple[str, int]


class RunningAttempts:
    def __init__(self, worker_id: str, reports: ReportSink, clock: Clock,
                 heartbeat_interval: timedelta, cancel_grace: timedelta,
                 started_memory: int) -> None:
        self._worker_id = worker_id
        self._reports = reports
        self._clock = clock
        self._heartbeat_interval = heartbeat_interval
        # When each running attempt's next heartbeat of the worker's is due, and its pace;
        # the earliest of them, so that a loop with none due looks at nothing.
        self._next_beat: dict[Key, tuple[datetime, timedelta]] = {}
        self._earliest_beat: datetime | None = None
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
        # Handlers' heartbeats not sent yet: the latest details (None: none given) and when.
        self._beats: dict[Key, tuple[bytes | None, datetime]] = {}
        # Attempts whose handler heartbeats, and when the last of them was sent: their
        # liveness is the handler's, the worker's own heartbeats leave them out.
        self._beat_sent: dict[Key, datetime] = {}

    def __len__(self) -> int:
        return len(self._running)

    def started_here(self, key: Key) -> bool:
        with self._lock:
            return key in self._started

    def begin(self, running: RunningAttempt) -> None:
        pace = heartbeat_pace(self._heartbeat_interval, running.heartbeat_timeout)
        due = self._clock.now() + pace
        with self._lock:
            self._running[running.key] = running
            self._next_beat[running.key] = (due, pace)
            if self._earliest_beat is None or due < self._earliest_beat:
                self._earliest_beat = due
            self._started[running.key] = None
            if len(self._started) > self._started_limit:
                self._started.popitem(last=False)
        running.context.on_heartbeat(partial(self._handler_beat, running.key))

    def handler_returned(self, running: RunningAttempt) -> None:
        """From the handler's thread, before its outcome is reported: a heartbeat still held
        back goes now, ahead of the outcome (its details are the attempt's last progress),
        and later ones go nowhere."""
        running.context.on_heartbeat(None)
        with self._lock:
            pending = self._beats.pop(running.key, None)
        if pending is not None and not running.stop_reason.startswith("cancelled"):
            self._send_heartbeat(running.key, running.job_id, pending[1], pending[0])

    def end(self, key: Key) -> None:
        """From the handler's thread, once its handler has returned or been stopped."""
        with self._lock:
            running = self._running.pop(key, None)
            self._beats.pop(key, None)
            self._beat_sent.pop(key, None)
            self._next_beat.pop(key, None)
        if running is not None:
            running.context.on_heartbeat(None)

    def _handler_beat(self, key: Key, details: bytes | None) -> None:
        """From the handler's thread: kept until heartbeat() sends it (HANDLER_BEAT_EVERY)."""
        now = self._clock.now()
        with self._lock:
            if key not in self._running:
                return
            if details is None and key in self._beats:
                details = self._beats[key][0]
            self._beats[key] = (details, now)

    def get(self, key: Key) -> RunningAttempt | None:
        with self._lock:
            return self._running.get(key)

    def heartbeat(self) -> None:
        """Every time round the loop: the handlers' heartbeats that are due, and one for
        each running attempt whose handler does not heartbeat and whose pace has come round
        (heartbeat_pace: the worker's interval, or less for a short heartbeat timeout)."""
        now = self._clock.now()
        if self._beats:
            self._send_handler_beats(now)
        due: list[tuple[Key, str]] = []
        with self._lock:
            if self._earliest_beat is None or now < self._earliest_beat:
                return
            earliest: datetime | None = None
            for key, (at, pace) in self._next_beat.items():
                if at <= now:
                    running = self._running[key]
                    # An attempt told to stop has ended for the owner already: no more
                    # heartbeats; one whose handler heartbeats is the handler's.
                    if not running.stop_reason.startswith("cancelled") \
                            and key not in self._beat_sent:
                        due.append((key, running.job_id))
                    at = now + pace
                    self._next_beat[key] = (at, pace)
                if earliest is None or at < earliest:
                    earliest = at
            self._earliest_beat = earliest
        # One message per attempt, sent together: the producer batches them.
        for key, job_id in due:
            self._send_heartbeat(key, job_id, now, None)

    def _send_handler_beats(self, now: datetime) -> None:
        due: list[tuple[Key, str, datetime, bytes | None]] = []
        with self._lock:
            for key, (details, at) in list(self._beats.items()):
                sent = self._beat_sent.get(key)
                if sent is not None and now - sent < HANDLER_BEAT_EVERY:
                    continue
                del self._beats[key]
                running = self._running.get(key)
                if running is not None and not running.stop_reason.startswith("cancelled"):
                    self._beat_sent[key] = now
                    due.append((key, running.job_id, at, details))
        for key, job_id, at, details in due:
            self._send_heartbeat(key, job_id, at, details)

    def _send_heartbeat(self, key: Key, job_id: str, at: datetime,
                        details: bytes | None) -> None:
        run_id, attempt = key
        self._reports.send(job_id, Report.HEARTBEAT, {
            "run_id": run_id, "job_id": job_id, "attempt": attempt,
            "worker": self._worker_id, "at": at, "details": details})

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
