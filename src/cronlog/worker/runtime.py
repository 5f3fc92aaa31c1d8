"""A worker: holds each dispatch until it is due, runs its handler, reports the outcome."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronlog.domain.catalogue import OwnerRecord, Report
from cronlog.log_fields import log_fields, record_fields
from cronlog.ports import Clock, InboundMessage
from cronlog.worker.attempt_stop import AttemptStopped, raise_in_thread
from cronlog.worker.execution import RunningAttempt, bound_output, context_of, invoke
from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.offsets import OffsetTracker
from cronlog.worker.ports import (
    DispatchSource,
    NoWorkerMetrics,
    ReportSink,
    ReportsNotDelivered,
    WorkerMetrics,
)
from cronlog.worker.slot_share import DEFAULT_SHARE, LINGER, SlotShare
from cronlog.worker.start_lateness import StartLateness

log = logging.getLogger(__name__)

TIMED_OUT = "ran past its timeout"
# Longest wait for a free handler slot before the loop goes on to poll, heartbeat, commit.
SLOT_WAIT = 0.05
# While runs whose time has come wait for a slot, reports (and the commits that flush them)
# wait at most this long: encoding and sending them would take the CPU from starting those
# runs, and nothing the owner does with a report is as urgent as a run starting on time.
REPORT_HOLD = timedelta(seconds=2)
# The loop's commits wait this long for their reports' acknowledgements, then leave the
# offsets where they are for the next round: with a partition leader's broker dead, the acks
# wait for the new leader (seconds), and a loop waiting 10 s for them started nothing due
# meanwhile (chaos cluster-failover). Stopping still waits up to 10 s.
COMMIT_FLUSH_WAIT = 1.0


@dataclass(slots=True)
class _Ready:
    """A held dispatch with what starting it needs, made when it arrives (up to a minute
    ahead) rather than at its due instant, when every microsecond of a burst counts."""

    message: InboundMessage
    key: tuple[str, int]
    job_id: str
    tenant: str
    context: HandlerContext
    timeout: timedelta
    arrived: datetime


@dataclass(frozen=True, slots=True)
class Occupancy:
    """A worker's handler slots and held dispatches, as one look sees them."""

    busy_slots: int
    free_slots: int
    held: int
    # Slots running a handler, by tenant (as the loop last counted them), and the share of
    # the slots a tenant may hold while another is present (worker/slot_share.py).
    busy_by_tenant: Mapping[str, int] = field(default_factory=dict)
    tenant_share: float = DEFAULT_SHARE


class WorkerRuntime:
    def __init__(self, worker_id: str, source: DispatchSource, reports: ReportSink,
                 handlers: HandlerRegistry, clock: Clock, slots: int = 16,
                 heartbeat_interval: timedelta = timedelta(seconds=10),
                 cancel_grace: timedelta = timedelta(seconds=5),
                 commit_interval: timedelta = timedelta(milliseconds=200),
                 started_memory: int = 100_000,
                 metrics: WorkerMetrics | None = None,
                 tenant_share: float = DEFAULT_SHARE,
                 tenant_linger: timedelta = LINGER) -> None:
        self.worker_id = worker_id
        self._metrics = metrics or NoWorkerMetrics()
        self._slots = slots
        self._source = source
        self._reports = reports
        self._handlers = handlers
        self._clock = clock
        # Free handler slots as tokens in a queue: taking and returning one is a C call,
        # where a threading.Semaphore runs a Condition in Python for each.
        self._free_slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(slots):
            self._free_slots.put(None)
        # Handler threads fed by a queue: a ThreadPoolExecutor's submit builds a Future, a
        # Condition and a work item per run, and was a fifth of the worker loop's time.
        self._handoff: queue.SimpleQueue[tuple[Mapping[str, object], RunningAttempt] | None] = \
            queue.SimpleQueue()
        self._handler_threads = [
            threading.Thread(target=self._handler_loop, name=f"handler-{i}", daemon=True)
            for i in range(slots)]
        self._threads_started = False
        # Every held dispatch, and which one a free slot goes to: each tenant its share.
        self._share: SlotShare[_Ready] = SlotShare(slots, tenant_share, tenant_linger)
        # Tenants whose handler gave its slot back, told to the loop (which alone keeps the
        # share's counts) before the slot itself is.
        self._finished: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._offsets = OffsetTracker()
        self._lock = threading.Lock()
        self._committed: dict[int, int] = {}
        self._stop = threading.Event()
        self._heartbeat_interval = heartbeat_interval
        self._last_heartbeat = clock.now()
        self._cancel_grace = cancel_grace
        # Committing flushes the reports first and waits for the broker: at most this often.
        # A worker that dies redelivers what it started since (at least once, same keys).
        self._commit_interval = commit_interval
        self._last_commit: datetime | None = None
        self._last_ship = clock.now()
        self._lateness = StartLateness(metrics=self._metrics)
        # Attempts whose handler is running, by (run_id, attempt).
        self._running: dict[tuple[str, int], RunningAttempt] = {}
        # Attempts this worker started lately. After its group session lapses (a broker
        # restart longer than the session timeout) the group hands its partitions back
        # from the last committed offsets: what it already started is not started again.
        self._started: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._started_limit = started_memory
        source.on_revoke(self._revoked)

    def _revoked(self, partitions: list[int]) -> None:
        """Dispatches held but not started now belong to another worker: let them go."""
        gone = set(partitions)
        # No commit here: a synchronous commit inside the rebalance callback, while the group
        # coordinator is away, blocked a worker's loop until the group dropped it. What this
        # worker started and gets back is not started again (self._started).
        self._share.drop(lambda ready: ready.message.partition in gone)
        with self._lock:
            for partition in gone:
                self._offsets.forget(partition)
                self._committed.pop(partition, None)

    def stop(self) -> None:
        self._stop.set()

    def occupancy(self) -> Occupancy:
        """Read from another thread (a metrics scrape): each number is one atomic look."""
        free = self._free_slots.qsize()
        share = self._share
        return Occupancy(self._slots - free, free, share.held, share.running_by_tenant(),
                         share.share)

    def run_forever(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
        finally:
            # Handlers already handed over still run and report before the worker stops.
            for _ in self._handler_threads:
                self._handoff.put(None)
            for thread in self._handler_threads:
                if thread.is_alive():
                    thread.join()
            self._commit(force=True)
            try:
                self._reports.flush(10)
            except ReportsNotDelivered as exc:
                # Their dispatches stay uncommitted (started ones) or their attempts are lost
                # by the owner's heartbeat deadline (finished ones): retried, not forgotten.
                log.error("stopping with reports not acknowledged: %s", exc)
            self._source.close()

    def step(self) -> None:
        lateness = self._lateness
        self._count_finished()
        timeout = self._poll_timeout()
        began = time.monotonic()
        messages = self._source.poll(timeout, 500)
        arrived = self._clock.now()
        for message in messages:
            self._accept(message, arrived)
        lateness.phase_took("poll", began)
        began = time.monotonic()
        self._start_due()
        lateness.phase_took("start", began)
        self._stop_overdue()
        self._heartbeat()
        now = self._clock.now()
        line = lateness.report(now)
        if line:
            log.warning("%s", line)
        if self._catching_up(now):
            return
        self._last_ship = now
        began = time.monotonic()
        self._reports.ship()
        lateness.phase_took("ship", began)
        began = time.monotonic()
        self._commit()
        lateness.phase_took("commit", began)

    def _catching_up(self, now: datetime) -> bool:
        """Runs are due, may start and wait for a slot, and reports have waited less than
        REPORT_HOLD. Runs held back by their tenant's share hold no reports."""
        return now - self._last_ship < REPORT_HOLD and self._share.startable(now)

    def _heartbeat(self) -> None:
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
                "worker": self.worker_id, "at": now})

    def _poll_timeout(self) -> float:
        now = self._clock.now()
        share = self._share
        if share.startable(now):
            return 0.0
        wait = 0.2
        due = share.next_due()
        if due is not None:
            wait = min(wait, max(0.0, (due - now).total_seconds()))
        if share.waiting(now):
            # Held back by their tenant's share: the loop waits for a handler to finish in
            # _start_due, not here, where nothing would wake it for one.
            wait = 0.0
        return wait

    def _count_finished(self) -> None:
        finished = self._finished
        share = self._share
        while True:
            try:
                tenant = finished.get_nowait()
            except queue.Empty:
                return
            share.finished(tenant)

    def _accept(self, message: InboundMessage, arrived: datetime) -> None:
        if message.name == OwnerRecord.CANCEL_ATTEMPT:
            with self._lock:
                self._offsets.received(message.partition, message.offset)
                self._offsets.settled(message.partition, message.offset)
            self._cancel(message.record)
            return
        if message.name != OwnerRecord.DISPATCH:
            log.error("dropping unexpected %s at %s[%d]@%d", message.name, message.topic,
                      message.partition, message.offset, extra=record_fields(message.record))
            return
        record = message.record
        key = (str(record["run_id"]), int(record["attempt"]))
        with self._lock:
            self._offsets.received(message.partition, message.offset)
            if key in self._started:
                self._offsets.settled(message.partition, message.offset)
                log.info("attempt %d of run %s was started here already: not again", key[1],
                         key[0], extra=record_fields(record))
                return
        context = context_of(record)
        job_id = str(record["job_id"])
        tenant = str(record.get("tenant") or "")
        self._reports.prepare(job_id)
        ready = _Ready(message, key, job_id, tenant, context,
                       timedelta(seconds=context.timeout_seconds), arrived)
        self._share.hold(tenant, record["not_before"], ready)

    def _start_due(self) -> None:
        now = self._clock.now()
        # With every slot busy and runs due, wait here for handlers to finish: going round the
        # loop instead polled Kafka once per started run, and the spinning took the CPU from
        # the handler threads it waited for. The rest of the loop still comes round every
        # SLOT_WAIT.
        give_up = time.monotonic() + SLOT_WAIT
        share = self._share
        free_slots = self._free_slots
        while True:
            if not share.startable(now):
                # Runs due but held back by their tenant's share start as soon as one of
                # that tenant's handlers finishes: waiting for the next poll instead started
                # at most a share of slots per SLOT_WAIT, 640 runs/s for a worker of 64
                # slots, whatever the handlers took (a burst beside another tenant's load).
                if not share.waiting(now) or not self._await_finish(give_up):
                    return
                continue
            try:
                free_slots.get_nowait()
            except queue.Empty:
                try:
                    free_slots.get(timeout=max(0.0, give_up - time.monotonic()))
                except queue.Empty:
                    return
            # The handler that gave this slot back told its tenant first.
            self._count_finished()
            chosen = share.next_start(now)
            if chosen is None:  # not reached: a finish only lets more tenants start
                free_slots.put(None)
                return
            _, due, ready = chosen
            self._start(ready, due)

    def _await_finish(self, give_up: float) -> bool:
        """Waits until a handler finishes (its tenant told to the share) or give_up."""
        try:
            tenant = self._finished.get(timeout=max(0.0, give_up - time.monotonic()))
        except queue.Empty:
            return False
        self._share.finished(tenant)
        return True

    def _cancel(self, record: Mapping[str, object]) -> None:
        """The owner ended an attempt (CancelRun, overlap policy, pause, update, delete):
        drop it if it is still held, tell its handler to stop if it is running."""
        run_id, attempt = str(record["run_id"]), int(str(record["attempt"]))
        dropped = self._share.drop(lambda ready: ready.key == (run_id, attempt))
        for ready in dropped:
            message = ready.message
            with self._lock:
                self._offsets.settled(message.partition, message.offset)
            self._metrics.attempt_cancelled("held")
            log.info("dropped attempt %d of run %s before it started: %s", attempt, run_id,
                     record["reason"], extra=record_fields(message.record))
        if dropped:
            return
        with self._lock:
            running = self._running.get((run_id, attempt))
        if running is not None:
            if running.stop_at is None:
                self._metrics.attempt_cancelled("running")
            self._tell_to_stop(running, f"cancelled: {record['reason']}")

    def _tell_to_stop(self, running: RunningAttempt, reason: str) -> None:
        if running.stop_at is not None:
            return
        running.stop_reason = reason
        running.stop_at = self._clock.now() + self._cancel_grace
        running.context.cancelled.set()
        log.info("told attempt %d of run %s to stop (%s)", running.context.attempt,
                 running.context.run_id, reason,
                 extra={"run_id": str(running.context.run_id), "job_id": running.job_id,
                        "attempt": running.context.attempt})

    def _stop_overdue(self) -> None:
        """Handlers past their timeout are told to stop; those told that have not stopped
        within the grace period are stopped by force."""
        now = self._clock.now()
        with self._lock:
            running = list(self._running.values())
        for r in running:
            if r.stop_at is None and r.timeout_at <= now:
                self._tell_to_stop(r, TIMED_OUT)
            elif r.stop_at is not None and r.stop_at <= now and r.thread_id is not None:
                log.warning("attempt %d of run %s did not stop within %s: stopping it",
                            r.context.attempt, r.context.run_id, self._cancel_grace,
                            extra=log_fields(job_id=r.job_id, run_id=r.context.run_id,
                                             attempt=r.context.attempt))
                raise_in_thread(r.thread_id)
                # Once is enough; the next try, if it is still there, is another grace later.
                r.stop_at = now + self._cancel_grace

    def _start(self, ready: _Ready, due: datetime) -> None:
        message, key = ready.message, ready.key
        record = message.record
        started_at = self._clock.now()
        self._lateness.started(due, ready.arrived, started_at)
        self._reports.send(ready.job_id, Report.ATTEMPT_STARTED, {
            "run_id": record["run_id"], "job_id": record["job_id"],
            "attempt": record["attempt"], "worker": self.worker_id, "started_at": started_at,
        })
        running = RunningAttempt(ready.job_id, key, ready.context, started_at + ready.timeout,
                                 tenant=ready.tenant)
        with self._lock:
            self._offsets.settled(message.partition, message.offset)
            self._running[key] = running
            self._started[key] = None
            if len(self._started) > self._started_limit:
                self._started.popitem(last=False)
        if not self._threads_started:
            self._threads_started = True
            for thread in self._handler_threads:
                thread.start()
        self._handoff.put((record, running))

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
                "attempt": record["attempt"], "worker": self.worker_id,
                "finished_at": self._clock.now(), "outcome": outcome,
                "output": data, "output_truncated": truncated, "error": error,
            })
            if outcome == "failed":
                # Without the error: it is the tenant's (the run's history has it), and a
                # handler's exception may quote what it was given.
                log.info("attempt %d of run %s failed", key[1], key[0],
                         extra=record_fields(record))
        except AttemptStopped:
            log.info("attempt %d of run %s stopped by force", key[1], key[0],
                     extra=record_fields(record))
        finally:
            self._metrics.handler_finished(handler_label, outcome, time.monotonic() - began)
            running.thread_id = None
            with self._lock:
                self._running.pop(key, None)
            # The tenant before the slot: whoever takes the slot counts the tenant's finish.
            self._finished.put(running.tenant)
            self._free_slots.put(None)

    def _commit(self, force: bool = False) -> None:
        now = self._clock.now()
        if (not force and self._last_commit is not None
                and now - self._last_commit < self._commit_interval):
            return
        self._last_commit = now
        with self._lock:
            offsets = self._offsets.committable()
        changed = {p: o for p, o in offsets.items() if self._committed.get(p) != o}
        if changed:
            # Reports must be durable before the dispatch they settle is committed.
            try:
                self._reports.flush(10 if force else COMMIT_FLUSH_WAIT)
            except ReportsNotDelivered as exc:
                # Not yet: the offsets stay where they are and the next cycle tries again.
                # The sink keeps the reports it could not deliver and sends them again.
                log.warning("dispatch offsets not committed, reports not acknowledged: %s",
                            exc)
                return
            self._source.commit(changed)
            self._committed.update(changed)
