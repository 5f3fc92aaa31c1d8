"""AttemptTracking: what the owner knows of its runs' attempts between cycles.

Worker reports start and end attempts; heartbeats keep a running attempt alive until its
heartbeat timeout, and a handler's carry its progress (recorded at most every
PROGRESS_EVERY); an attempt running past its timeout is timed out; a dispatched attempt
no worker starts within the start timeout is lost; a waiting attempt (a retry after its
backoff, a spread run) is dispatched once its time is within the lookahead.
"""

from __future__ import annotations

import logging
import random
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands.owner import owner_messages as messages
from cronlog.commands.owner.attempt_timers import AttemptTimers
from cronlog.commands.owner.owner_cycle import Cycle, Handler
from cronlog.commands.owner.ports import Deadline, Produced, Topics
from cronlog.commands.owner.set_aside import JobsSetAside, blaming
from cronlog.domain.catalogue import Report, RunEvent
from cronlog.domain.ids import as_uuid
from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.log_fields import log_fields, record_fields
from cronlog.ports import Record

log = logging.getLogger(__name__)

# An attempt's progress becomes an AttemptProgressed event at most this often, and only when
# its details changed; the latest details in between wait here, and go before the attempt's
# end. A handler heartbeating every second costs at most one event per 10 s, not ten: the
# same order as the workers' own heartbeats (docs/handlers.md, "Heartbeats and progress").
PROGRESS_EVERY = timedelta(seconds=10)

ENDED_ATTEMPT = frozenset({RunEvent.ATTEMPT_SUCCEEDED, RunEvent.ATTEMPT_FAILED,
                           RunEvent.ATTEMPT_LOST, RunEvent.ATTEMPT_TIMED_OUT,
                           RunEvent.ATTEMPT_CANCELLED})


class AttemptTracking:
    def __init__(self, topics: Topics, set_aside: JobsSetAside, rng: random.Random,
                 start_timeout: timedelta, chunk: int) -> None:
        self._topics = topics
        self._set_aside = set_aside
        self._rng = rng
        self._start_timeout = start_timeout
        # At most this many attempts lost or dispatched a cycle: a queue unserved for a while
        # must not make one cycle (one transaction) lose every attempt it held.
        self._chunk = chunk
        # Running attempts, by run: their heartbeat and timeout deadlines.
        self.deadlines: dict[UUID, Deadline] = {}
        # Dispatched attempts not started yet: lost when not started within start_timeout.
        self.start_deadlines = AttemptTimers()
        # Attempts due later than the lookahead (AttemptWaiting), by when to dispatch them.
        self.waiting = AttemptTimers()
        # Queues whose attempts were lost unstarted, alerted once until one starts again.
        self.unserved_queues: set[str] = set()

    def handlers(self) -> dict[str, Handler]:
        return {Report.ATTEMPT_STARTED: self.started, Report.ATTEMPT_FINISHED: self.finished,
                Report.HEARTBEAT: self.heartbeat}

    # -- taking and leaving partitions ---------------------------------------------------
    def forget(self, partitions: set[int]) -> None:
        for key in [k for k, d in self.deadlines.items() if d.partition in partitions]:
            del self.deadlines[key]
        self.start_deadlines.drop_partitions(partitions)
        self.waiting.drop_partitions(partitions)

    def forget_all(self) -> None:
        self.deadlines.clear()

    def track_in_flight(self, partition: int, run: Run, job: Job | None,
                        now: datetime) -> None:
        """A new owner has no heartbeats yet: every running attempt gets a full timeout."""
        if run.attempt_status == "waiting":
            self.waiting.expect(run.id, run.attempt, partition, run.not_before)
        if run.attempt_status == "dispatched":
            start_timeout = (job.spec.start_timeout if job is not None else None) \
                or self._start_timeout
            self.start_deadlines.expect(run.id, run.attempt, partition,
                                        max(run.not_before, now) + start_timeout)
        elif run.attempt_status == "running" and job is not None:
            self.deadlines[run.id] = Deadline(
                partition, run.attempt, job.spec.heartbeat_timeout,
                now + job.spec.heartbeat_timeout, now + job.spec.timeout)

    # -- worker reports ------------------------------------------------------------------
    def started(self, record: Record, now: datetime, cycle: Cycle) -> None:
        run = cycle.run(as_uuid(record["run_id"]))
        if run is None:
            log.warning("start report for unknown run %s", record["run_id"],
                        extra=record_fields(record))
            return
        run.start(attempt=int(record["attempt"]), worker=str(record["worker"]),
                  started_at=record["started_at"], at=now)

    def finished(self, record: Record, now: datetime, cycle: Cycle) -> None:
        run = cycle.run(as_uuid(record["run_id"]))
        if run is None:
            log.warning("finish report for unknown run %s", record["run_id"],
                        extra=record_fields(record))
            return
        self._record_progress(run.id, int(record["attempt"]), now, cycle, at_end=True)
        common = {"attempt": int(record["attempt"]), "worker": str(record["worker"]),
                  "finished_at": record["finished_at"], "output": bytes(record["output"]),
                  "truncated": bool(record["output_truncated"]), "at": now}
        # WorkerReports v2: the worker sent the attempt's start with its end.
        started_at = record.get("started_at")
        if record["outcome"] == "succeeded":
            run.succeed(**common, started_at=started_at)
            return
        if started_at is not None:
            run.start(attempt=common["attempt"], worker=common["worker"],
                      started_at=started_at, at=now)
        job = cycle.job(run.job_id)
        if job is None:
            log.error("run %s belongs to unknown job %s", run.id, run.job_id,
                      extra=log_fields(run.tenant, run.job_id, run.id, run.attempt))
            return
        run.fail(error=str(record.get("error") or "failed"), policy=job.spec.retry_policy,
                 timeout=job.spec.timeout, random_unit=self._rng.random(),
                 dispatch_until=cycle.dispatch_until, **common)

    def heartbeat(self, record: Record, now: datetime, cycle: Cycle) -> None:
        run_id = as_uuid(record["run_id"])
        deadline = self.deadlines.get(run_id)
        if deadline is None or deadline.attempt != int(record["attempt"]):
            return
        deadline.heartbeat_due = now + deadline.heartbeat_timeout
        # HeartbeatReport v2: a handler's, with its progress (none in v1 and the worker's).
        details = record.get("details")
        if details is not None:
            deadline.progress = (bytes(details), str(record["worker"]), record["at"])
            self._record_progress(run_id, deadline.attempt, now, cycle)

    def _record_progress(self, run_id: UUID, attempt: int, now: datetime, cycle: Cycle,
                         at_end: bool = False) -> None:
        """The attempt's waiting progress as an AttemptProgressed, when PROGRESS_EVERY has
        passed since the last one (at its end: now) and its details are new."""
        deadline = self.deadlines.get(run_id)
        if deadline is None or deadline.attempt != attempt or deadline.progress is None:
            return
        last = deadline.progress_recorded_at
        if not at_end and last is not None and now - last < PROGRESS_EVERY:
            return
        (details, worker, given_at), deadline.progress = deadline.progress, None
        if details == deadline.recorded_progress:
            return
        run = cycle.run(run_id)
        if run is None or run.job_id in self._set_aside:
            return
        with blaming(run.job_id, run.tenant):
            if run.progress(attempt, worker, details, given_at, now):
                deadline.recorded_progress, deadline.progress_recorded_at = details, now

    # -- deciding ------------------------------------------------------------------------
    def expire(self, now: datetime, cycle: Cycle) -> None:
        """Running attempts whose heartbeats stopped, or that ran past their timeout."""
        for run_id, deadline in list(self.deadlines.items()):
            lost = deadline.heartbeat_due <= now
            ends = lost or deadline.timeout_due <= now
            if deadline.progress is not None:
                self._record_progress(run_id, deadline.attempt, now, cycle, at_end=ends)
            if not ends:
                continue
            run = cycle.run(run_id)
            job = cycle.job(run.job_id) if run is not None else None
            if run is None or job is None:
                del self.deadlines[run_id]
                continue
            if job.id in self._set_aside:
                continue
            with blaming(job.id, job.spec.tenant):
                policy, timeout = job.spec.retry_policy, job.spec.timeout
                if lost:
                    run.lose(deadline.attempt, f"no heartbeat for {deadline.heartbeat_timeout}",
                             now, policy, timeout, self._rng.random(), cycle.dispatch_until)
                else:
                    run.time_out(deadline.attempt, now, policy, timeout, self._rng.random(),
                                 cycle.dispatch_until)
        self._expire_unstarted(now, cycle)

    def _expire_unstarted(self, now: datetime, cycle: Cycle) -> None:
        """Dispatched attempts no worker started within the start timeout of their time."""
        for overdue in self.start_deadlines.overdue(now)[:self._chunk]:
            run = cycle.run(overdue.run_id)
            job = cycle.job(run.job_id) if run is not None else None
            if run is None or job is None or run.attempt != overdue.attempt \
                    or run.attempt_status != "dispatched":
                self.start_deadlines.settled(overdue.run_id)
                continue
            if job.id in self._set_aside:
                continue
            with blaming(job.id, job.spec.tenant):
                queue = cycle.dispatched_to.get(run.id) or job.spec.queue
                start_timeout = job.spec.start_timeout or self._start_timeout
                run.lose(overdue.attempt, f"not started within {start_timeout} of its "
                         f"time: no worker of queue {queue!r} took it", now,
                         job.spec.retry_policy, job.spec.timeout, self._rng.random(),
                         cycle.dispatch_until)
                cycle.never_started.add(run.id)
                if queue not in self.unserved_queues:
                    cycle.alerts.append(messages.unserved_queue_alert(
                        self._topics, run, queue, start_timeout, now))
                    cycle.alerted_queues.add(queue)

    def dispatch_waiting(self, now: datetime, cycle: Cycle) -> None:
        """Dispatches the waiting attempts (retries after a backoff, spread runs) whose time
        has come within the lookahead: workers then hold no dispatch for longer."""
        for due in self.waiting.overdue(cycle.dispatch_until)[:self._chunk]:
            run = cycle.run(due.run_id)
            job = cycle.job(run.job_id) if run is not None else None
            if run is None or job is None or run.attempt != due.attempt \
                    or run.attempt_status != "waiting":
                self.waiting.settled(due.run_id)
                continue
            if job.id in self._set_aside:
                continue
            with blaming(job.id, job.spec.tenant):
                run.dispatch_waiting(job.spec.timeout, now)

    # -- after a commit ------------------------------------------------------------------
    def committed(self, event: Produced, now: datetime, cycle: Cycle) -> None:
        """Follows a committed run event to know which attempts are running."""
        name, record = event.name, event.record
        if name == RunEvent.ATTEMPT_STARTED:
            run_id = as_uuid(record["run_id"])
            self.start_deadlines.settled(run_id)
            self._served(run_id, cycle)
            job = cycle.job(as_uuid(record["job_id"]))
            if job is None:
                return
            spec = job.spec
            started: datetime = record["started_at"]
            self.deadlines[run_id] = Deadline(
                event.partition, int(record["attempt"]), spec.heartbeat_timeout,
                now + spec.heartbeat_timeout, max(started, now) + spec.timeout)
        elif name == RunEvent.ATTEMPT_WAITING:
            self.waiting.expect(as_uuid(record["run_id"]), int(record["attempt"]),
                                event.partition, record["not_before"])
        elif name == RunEvent.ATTEMPT_DISPATCHED or (name == RunEvent.SCHEDULED and record.get("attempt")):
            self.waiting.settled(as_uuid(record["run_id"]))
            job = cycle.job(as_uuid(record["job_id"]))
            start_timeout = (job.spec.start_timeout if job is not None else None) \
                or self._start_timeout
            # From its time, or from now for a run dispatched after its time.
            self.start_deadlines.expect(as_uuid(record["run_id"]), int(record["attempt"]),
                                        event.partition,
                                        max(record["not_before"], now) + start_timeout)
        elif name in ENDED_ATTEMPT:
            run_id = as_uuid(record["run_id"])
            self.deadlines.pop(run_id, None)
            self.start_deadlines.settled(run_id)
            self.waiting.settled(run_id)
            if record.get("started_at") is not None:  # started and ended in one event
                self._served(run_id, cycle)

    def _served(self, run_id: UUID, cycle: Cycle) -> None:
        """A worker started one of the run's attempts: its queue is served."""
        if self.unserved_queues and run_id in cycle.runs:
            self.unserved_queues.discard(cycle.runs[run_id].queue)

    def cycle_committed(self, cycle: Cycle) -> None:
        self.unserved_queues |= cycle.alerted_queues
        for run in cycle.runs.values():
            if run.finished:
                self.start_deadlines.settled(run.id)
                self.waiting.settled(run.id)
