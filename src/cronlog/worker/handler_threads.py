"""The worker's handler slots and the threads that run handlers in them: an attempt given
a free slot runs its handler on one of the threads, which reports its outcome and gives
the slot back, its tenant told first (worker/slot_share.py keeps the counts)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping

from cronlog.domain.catalogue import Report
from cronlog.log_fields import record_fields
from cronlog.ports import Clock
from cronlog.worker.attempt_stop import AttemptStopped
from cronlog.worker.execution import RunningAttempt, bound_output, invoke
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.ports import ReportSink, WorkerMetrics
from cronlog.worker.running_attempts import TIMED_OUT, RunningAttempts

# The worker's log lines keep one logger name, whichever part of it writes them.
log = logging.getLogger("cronlog.worker.runtime")


class HandlerThreads:
    def __init__(self, worker_id: str, slots: int, handlers: HandlerRegistry,
                 running: RunningAttempts, reports: ReportSink, clock: Clock,
                 metrics: WorkerMetrics) -> None:
        self._worker_id = worker_id
        self._handlers = handlers
        self._running = running
        self._reports = reports
        self._clock = clock
        self._metrics = metrics
        # Free handler slots as tokens in a queue: taking and returning one is a C call,
        # where a threading.Semaphore runs a Condition in Python for each.
        self._free_slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(slots):
            self._free_slots.put(None)
        # Handler threads fed by a queue: a ThreadPoolExecutor's submit builds a Future, a
        # Condition and a work item per run, and was a fifth of the worker loop's time.
        self._handoff: queue.SimpleQueue[tuple[Mapping[str, object], RunningAttempt] | None] = \
            queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._handler_loop, name=f"handler-{i}", daemon=True)
            for i in range(slots)]
        self._threads_started = False
        # Tenants whose handler gave its slot back, told to the loop (which alone keeps the
        # share's counts) before the slot itself is.
        self.finished: queue.SimpleQueue[str] = queue.SimpleQueue()

    @property
    def free(self) -> int:
        """Free slots, in one atomic look (from any thread)."""
        return self._free_slots.qsize()

    def take_slot(self, give_up: float) -> bool:
        """A free slot, waiting for one until `give_up` (monotonic seconds) at most."""
        free_slots = self._free_slots
        try:
            free_slots.get_nowait()
        except queue.Empty:
            try:
                free_slots.get(timeout=max(0.0, give_up - time.monotonic()))
            except queue.Empty:
                return False
        return True

    def give_back_slot(self) -> None:
        self._free_slots.put(None)

    def run(self, record: Mapping[str, object], running: RunningAttempt) -> None:
        """Runs the attempt's handler on a thread, in the slot taken for it."""
        if not self._threads_started:
            self._threads_started = True
            for thread in self._threads:
                thread.start()
        self._handoff.put((record, running))

    def close(self) -> None:
        """Handlers already handed over still run and report before this returns."""
        for _ in self._threads:
            self._handoff.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    def _handler_loop(self) -> None:
        while True:
            try:
                item = self._handoff.get()
                if item is None:
                    return
                self._execute(*item)
            except AttemptStopped:
                # A stop meant for the handler that arrived just after it returned: the
                # thread is needed for the next run.
                continue

    def _execute(self, record: Mapping[str, object], running: RunningAttempt) -> None:
        key = running.key
        handler = str(record["handler"])
        # Only registered names become label values: a dispatch may name anything.
        handler_label = handler if handler in self._handlers else "unknown"
        began = time.monotonic()
        outcome = "stopped_by_force"
        try:
            running.thread_id = threading.get_ident()
            outcome, output, error = invoke(self._handlers, record, running.context)
            running.thread_id = None
            self._running.handler_returned(running)
            if running.stop_at is not None and outcome != "succeeded":
                # Cancelled: the owner ended the attempt already. Past its timeout: the owner
                # times it out on its own deadline. Either way it is the owner's to record.
                outcome = "timed_out" if running.stop_reason == TIMED_OUT else "cancelled"
                log.info("attempt %d of run %s stopped: %s", key[1], key[0],
                         running.stop_reason, extra=record_fields(record))
                return
            data, truncated = bound_output(output)
            self._reports.send(running.job_id, Report.ATTEMPT_FINISHED, {
                "run_id": record["run_id"], "job_id": record["job_id"],
                "attempt": record["attempt"], "worker": self._worker_id,
                "finished_at": self._clock.now(), "outcome": outcome,
                "output": data, "output_truncated": truncated, "error": error,
            })
            if outcome == "failed":
                # Without the error: it is the tenant's (the run's history has it), and a
                # handler's exception may quote what it was given.
                log.info("attempt %d of run %s failed", key[1], key[0],
                         extra=record_fields(record))
        except AttemptStopped:
            # First: no further forced stop may aim at this thread, out of the handler now.
            running.thread_id = None
            log.info("attempt %d of run %s stopped by force", key[1], key[0],
                     extra=record_fields(record))
        finally:
            running.thread_id = None
            self._metrics.handler_finished(handler_label, outcome, time.monotonic() - began)
            self._running.end(key)
            # The tenant before the slot: whoever takes the slot counts the tenant's finish.
            self.finished.put(running.tenant)
            self._free_slots.put(None)
