"""A worker: holds each dispatch until it is due, runs its handler, reports the outcome.

The loop polls the dispatch topics, holds each dispatch until its time (worker/
slot_share.py: each tenant its share of the slots), starts it in a free handler slot
(worker/handler_threads.py), looks after the attempts running (worker/running_attempts.py:
heartbeats, stops) and commits the dispatch offsets (worker/dispatch_commits.py)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronlog.domain.catalogue import OwnerRecord, Report
from cronlog.log_fields import record_fields
from cronlog.ports import Clock, InboundMessage
from cronlog.worker.dispatch_commits import DispatchCommits
from cronlog.worker.execution import RunningAttempt, context_of
from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handler_threads import HandlerThreads
from cronlog.worker.handlers import HandlerRegistry
from cronlog.worker.ports import (
    DispatchSource,
    NoWorkerMetrics,
    ReportSink,
    ReportsNotDelivered,
    WorkerMetrics,
)
from cronlog.worker.running_attempts import RunningAttempts
from cronlog.worker.slot_share import DEFAULT_SHARE, LINGER, SlotShare
from cronlog.worker.start_lateness import StartLateness

log = logging.getLogger(__name__)

# Longest wait for a free handler slot before the loop goes on to poll, heartbeat, commit.
SLOT_WAIT = 0.05
# While runs whose time has come wait for a slot, reports (and the commits that flush them)
# wait at most this long: encoding and sending them would take the CPU from starting those
# runs, and nothing the owner does with a report is as urgent as a run starting on time.
REPORT_HOLD = timedelta(seconds=2)
# The longest a step's gathered reports wait for the next step to ship them, when no run is
# due sooner: long enough for most runs to end and carry their start, short against every
# deadline the owner keeps for a start.
REPORT_SHIP_WAIT = 0.1


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
    heartbeat_timeout: timedelta | None


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
        self._running = RunningAttempts(worker_id, reports, clock, heartbeat_interval,
                                        cancel_grace, started_memory)
        self._threads = HandlerThreads(worker_id, slots, handlers, self._running, reports,
                                       clock, self._metrics)
        # Every held dispatch, and which one a free slot goes to: each tenant its share.
        self._share: SlotShare[_Ready] = SlotShare(slots, tenant_share, tenant_linger)
        self._commits = DispatchCommits(source, reports, commit_interval)
        self._stop = threading.Event()
        self._last_ship = clock.now()
        self._lateness = StartLateness(metrics=self._metrics)
        source.on_revoke(self._revoked)

    def _revoked(self, partitions: list[int]) -> None:
        """Dispatches held but not started now belong to another worker: let them go."""
        gone = set(partitions)
        # No commit here: a synchronous commit inside the rebalance callback, while the group
        # coordinator is away, blocked a worker's loop until the group dropped it. What this
        # worker started and gets back is not started again (RunningAttempts.started_here).
        self._share.drop(lambda ready: ready.message.partition in gone)
        self._commits.forget(gone)

    def stop(self) -> None:
        self._stop.set()

    @property
    def slots(self) -> int:
        return self._slots

    def handler_names(self) -> list[str]:
        """What this worker offers (fleet/announcer.py announces it)."""
        return self._handlers.names()

    def occupancy(self) -> Occupancy:
        """Read from another thread (a metrics scrape): each number is one atomic look."""
        free = self._threads.free
        share = self._share
        return Occupancy(self._slots - free, free, share.held, share.running_by_tenant(),
                         share.share)

    def run_forever(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
        finally:
            # Handlers already handed over still run and report before the worker stops.
            self._threads.close()
            self._commits.commit(self._clock.now(), force=True)
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
        # Reports go out before this step's starts, not after them: a start stays gathered
        # until the next step, by when a short run has ended and its end carries it (one
        # report, and one event at the owner, instead of two). Shipping right after the
        # starts sent a fifth of the starts of the steady bench alone. The commit's flush
        # follows the ship, so a start is durable before its dispatch is committed all the
        # same (it is committed at the next step's commit at the earliest).
        now = self._clock.now()
        if not self._catching_up(now):
            self._last_ship = now
            began = time.monotonic()
            self._reports.ship()
            lateness.phase_took("ship", began)
            began = time.monotonic()
            self._commits.commit(now)
            lateness.phase_took("commit", began)
        began = time.monotonic()
        self._start_due()
        lateness.phase_took("start", began)
        self._running.stop_overdue()
        self._running.heartbeat()
        line = lateness.report(self._clock.now())
        if line:
            log.warning("%s", line)

    def _catching_up(self, now: datetime) -> bool:
        """Runs are due, may start and wait for a slot, and reports have waited less than
        REPORT_HOLD. Runs held back by their tenant's share hold no reports."""
        return now - self._last_ship < REPORT_HOLD and self._share.startable(now)

    def _poll_timeout(self) -> float:
        now = self._clock.now()
        share = self._share
        if share.startable(now):
            return 0.0
        # Gathered reports ship at the next step: soon, even when nothing else is due.
        wait = REPORT_SHIP_WAIT if self._reports.gathered else 0.2
        due = share.next_due()
        if due is not None:
            wait = min(wait, max(0.0, (due - now).total_seconds()))
        if share.waiting(now):
            # Held back by their tenant's share: the loop waits for a handler to finish in
            # _start_due, not here, where nothing would wake it for one.
            wait = 0.0
        return wait

    def _count_finished(self) -> None:
        finished = self._threads.finished
        share = self._share
        while True:
            try:
                tenant = finished.get_nowait()
            except queue.Empty:
                return
            share.finished(tenant)

    def _accept(self, message: InboundMessage, arrived: datetime) -> None:
        if message.name == OwnerRecord.CANCEL_ATTEMPT:
            self._commits.received(message.partition, message.offset)
            self._commits.settled(message.partition, message.offset)
            self._cancel(message.record)
            return
        if message.name != OwnerRecord.DISPATCH:
            log.error("dropping unexpected %s at %s[%d]@%d", message.name, message.topic,
                      message.partition, message.offset, extra=record_fields(message.record))
            return
        record = message.record
        key = (str(record["run_id"]), int(record["attempt"]))
        self._commits.received(message.partition, message.offset)
        if self._running.started_here(key):
            self._commits.settled(message.partition, message.offset)
            log.info("attempt %d of run %s was started here already: not again", key[1],
                     key[0], extra=record_fields(record))
            return
        context = context_of(record)
        job_id = str(record["job_id"])
        tenant = str(record.get("tenant") or "")
        self._reports.prepare(job_id)
        beat = record.get("heartbeat_timeout_ms")
        ready = _Ready(message, key, job_id, tenant, context,
                       timedelta(seconds=context.timeout_seconds), arrived,
                       timedelta(milliseconds=int(beat)) if isinstance(beat, int) else None)
        self._share.hold(tenant, record["not_before"], ready)

    def _start_due(self) -> None:
        now = self._clock.now()
        # With every slot busy and runs due, wait here for handlers to finish: going round the
        # loop instead polled Kafka once per started run, and the spinning took the CPU from
        # the handler threads it waited for. The rest of the loop still comes round every
        # SLOT_WAIT.
        give_up = time.monotonic() + SLOT_WAIT
        share = self._share
        threads = self._threads
        while True:
            if not share.startable(now):
                # Runs due but held back by their tenant's share start as soon as one of
                # that tenant's handlers finishes: waiting for the next poll instead started
                # at most a share of slots per SLOT_WAIT, 640 runs/s for a worker of 64
                # slots, whatever the handlers took (a burst beside another tenant's load).
                if not share.waiting(now) or not self._await_finish(give_up):
                    return
                continue
            if not threads.take_slot(give_up):
                return
            # The handler that gave this slot back told its tenant first.
            self._count_finished()
            chosen = share.next_start(now)
            if chosen is None:  # not reached: a finish only lets more tenants start
                threads.give_back_slot()
                return
            _, due, ready = chosen
            self._start(ready, due)

    def _await_finish(self, give_up: float) -> bool:
        """Waits until a handler finishes (its tenant told to the share) or give_up."""
        try:
            tenant = self._threads.finished.get(timeout=max(0.0, give_up - time.monotonic()))
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
            self._commits.settled(message.partition, message.offset)
            self._metrics.attempt_cancelled("held")
            log.info("dropped attempt %d of run %s before it started: %s", attempt, run_id,
                     record["reason"], extra=record_fields(message.record))
        if dropped:
            return
        running = self._running.get((run_id, attempt))
        if running is not None:
            if running.stop_at is None:
                self._metrics.attempt_cancelled("running")
            self._running.tell_to_stop(running, f"cancelled: {record['reason']}")

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
                                 tenant=ready.tenant, heartbeat_timeout=ready.heartbeat_timeout)
        self._commits.settled(message.partition, message.offset)
        self._running.begin(running)
        self._threads.run(record, running)
