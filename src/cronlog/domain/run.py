"""The Run aggregate: one fire time of one job, and its attempts.

Worker reports arrive at least once and possibly out of order, so each transition checks
that it applies to the current attempt in the state it expects; a report that does not
produces no event. That is how each attempt ends exactly once (invariant 6).

Beside it: a run's place among dependent jobs (domain/run_chain.py), what follows an
attempt that failed, was lost or timed out (domain/attempt_retry.py), which held run is
dispatched next (domain/held_runs.py), an attempt's progress (domain/attempt_progress.py)
and a dead letter's re-drive (domain/run_redrive.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.attempt_retry import Retry, after_attempt, retry_counted_from
from cronlog.domain.catalogue import RunEvent
from cronlog.domain.ids import run_id_for
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.run_chain import NO_CHAIN, SCHEDULED_CHAIN, chain_fields, chain_of
from cronlog.domain.run_chain import Chain as Chain  # re-exported: domain/job.py takes it
from cronlog.domain.run_redrive import RunRedrive
from cronlog.domain.run_states import (
    ATTEMPT_CANCELLED,
    ATTEMPT_FAILED,
    ATTEMPT_LOST,
    ATTEMPT_NONE,
    ATTEMPT_RUNNING,
    ATTEMPT_SUCCEEDED,
    ATTEMPT_TIMED_OUT,
    CANCELLED,
    DISPATCHED,
    MISSED,
    RUNNING,
    SCHEDULED,
    SKIPPED,
    SUCCEEDED,
    TERMINAL_RUN,
    WAITING,
    error_type_of,
    spread_offset,
)
from cronlog.domain.schedule import FireTime
from cronlog.domain.spec import JobSpec


class RunsOf(Protocol):
    """The job a run is of, as a run sees it: its id and its spec (Job, without importing
    it: the job creates its runs)."""

    @property
    def id(self) -> UUID: ...

    @property
    def spec(self) -> JobSpec: ...


class Run(RunRedrive):
    job_id: UUID
    tenant: str
    queue: str
    handler: str
    scheduled_at: FireTime
    trigger: str
    max_attempts: int
    status: str
    attempt: int
    attempt_status: str
    not_before: datetime
    chain: Chain
    attempt_base: int  # the last attempt before a re-drive (domain/run_redrive.py)

    @staticmethod
    def create_id(run_id: UUID, **_: Any) -> UUID:
        return run_id

    @event("RunScheduled")
    def __init__(self, run_id: UUID, job_id: UUID, tenant: str, queue: str, handler: str,
                 scheduled_at: FireTime, not_before: datetime, trigger: str,
                 max_attempts: int, timestamp: datetime, attempt: int = 0,
                 timeout_ms: int = 0, logical_time: datetime | None = None,
                 cascade: str | None = None, upstream_run_ids: tuple[UUID, ...] = (),
                 depth: int = 0) -> None:
        # A run that is not held is dispatched in the event that creates it (attempt 1 at
        # not_before, with timeout_ms): one event per run instead of two. Older logs
        # (RunScheduled v1) follow it with AttemptDispatched instead, and read as attempt 0.
        self.job_id = job_id
        self.tenant = tenant
        self.queue = queue
        self.handler = handler
        self.scheduled_at = scheduled_at
        self.trigger = trigger
        self.max_attempts = max_attempts
        self.status = SCHEDULED
        self.attempt = attempt
        self.attempt_status = DISPATCHED if attempt else ATTEMPT_NONE
        self.not_before = not_before
        self.chain = chain_of(trigger, logical_time, cascade, upstream_run_ids, depth)
        self.attempt_base = 0

    @property
    def logical_time(self) -> datetime:
        """The fire time that started the run's chain: its own unless a dependency run."""
        return self.chain.logical_time or self.scheduled_at

    @classmethod
    def schedule(cls, job: RunsOf, scheduled_at: FireTime, trigger: str, at: datetime,
                 run_id: UUID | None = None, hold: bool = False,
                 not_before: datetime | None = None,
                 dispatch_until: datetime | None = None, chain: Chain = NO_CHAIN) -> Run:
        """The run of one fire time, with its first attempt dispatched for that time.

        A held run (overlap policy BUFFER_ONE, or a backfill that must not overlap) waits
        undispatched until `release` once the job's earlier runs have ended. A run whose
        start (its time plus the job's spread) is later than `dispatch_until` waits for the
        owner to dispatch it then (`dispatch_waiting`).
        """
        spec = job.spec
        if not_before is None:
            not_before = scheduled_at + (spread_offset(job.id, spec.spread)
                                         if trigger == "schedule" else timedelta(0))
        later = not hold and dispatch_until is not None and not_before > dispatch_until
        run_id = run_id or run_id_for(job.id, scheduled_at)
        # What calling the class does, without its matching of arguments to __init__'s
        # parameters (every one is given here by name): once per run on the owner's hot
        # path. eventsourcing leaves `_create(event_class, ...)` to subclasses for this.
        run = cls._create(_RUN_SCHEDULED, id=run_id, run_id=run_id, job_id=job.id,
                          tenant=spec.tenant, queue=spec.queue, handler=spec.handler,
                          scheduled_at=scheduled_at, not_before=not_before, trigger=trigger,
                          max_attempts=spec.retry_policy.max_attempts, timestamp=at,
                          attempt=0 if hold or later else 1,
                          timeout_ms=0 if hold or later
                          else int(spec.timeout.total_seconds() * 1000),
                          **chain_fields(chain))
        if later:
            run._waiting(job_id=job.id, attempt=1, not_before=not_before, timestamp=at)
        return run

    @property
    def held(self) -> bool:
        """Scheduled but not dispatched yet: waiting for the job's earlier runs to end."""
        return self.status == SCHEDULED and self.attempt == 0

    def dispatch_waiting(self, timeout: timedelta, at: datetime) -> bool:
        """Dispatches a waiting attempt (its time has come within the lookahead)."""
        if self.finished or self.attempt_status != WAITING:
            return False
        self._dispatched(job_id=self.job_id, attempt=self.attempt, not_before=self.not_before,
                         timeout_ms=int(timeout.total_seconds() * 1000), timestamp=at)
        return True

    @event("AttemptWaiting")
    def _waiting(self, job_id: UUID, attempt: int, not_before: datetime,
                 timestamp: datetime) -> None:
        self.attempt = attempt
        self.attempt_status = WAITING
        self.not_before = not_before
        self.status = SCHEDULED

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_RUN

    def release(self, timeout: timedelta, at: datetime,
                dispatch_until: datetime | None = None) -> bool:
        """Dispatches a held run's first attempt, no earlier than its own time (waiting, when
        that is after `dispatch_until`)."""
        if not self.held:
            return False
        if dispatch_until is not None and self.not_before > dispatch_until:
            self._waiting(job_id=self.job_id, attempt=1, not_before=self.not_before,
                          timestamp=at)
            return True
        self._dispatched(job_id=self.job_id, attempt=1, not_before=max(self.not_before, at),
                         timeout_ms=int(timeout.total_seconds() * 1000), timestamp=at)
        return True

    def cancel(self, reason: str, at: datetime) -> int | None:
        """Ends the run as cancelled; returns the attempt a worker must be told to stop
        (0 when none was dispatched), or None when the run had already finished."""
        if self.finished:
            return None
        attempt = 0
        if self.attempt_status in (DISPATCHED, ATTEMPT_RUNNING, WAITING):
            # A waiting attempt was never dispatched, but it is recorded: it ends too.
            attempt = self.attempt
            self._attempt_cancelled(job_id=self.job_id, attempt=attempt, reason=reason,
                                    timestamp=at)
        self._run_cancelled(job_id=self.job_id, reason=reason[:2000], timestamp=at)
        return attempt

    @event("AttemptCancelled")
    def _attempt_cancelled(self, job_id: UUID, attempt: int, reason: str,
                           timestamp: datetime) -> None:
        self.attempt_status = ATTEMPT_CANCELLED

    @event("RunCancelled")
    def _run_cancelled(self, job_id: UUID, reason: str, timestamp: datetime) -> None:
        self.status = CANCELLED

    def replace_dispatch(self, reason: str, timeout: timedelta, at: datetime) -> int | None:
        """A dispatched attempt that has not started is withdrawn and dispatched again (the
        job's spec changed under it); returns the withdrawn attempt, or None if the run had
        already started or finished."""
        if self.finished or self.attempt_status != DISPATCHED:
            return None
        withdrawn = self.attempt
        self._attempt_cancelled(job_id=self.job_id, attempt=withdrawn, reason=reason,
                                timestamp=at)
        self._dispatched(job_id=self.job_id, attempt=withdrawn + 1,
                         not_before=max(self.not_before, at),
                         timeout_ms=int(timeout.total_seconds() * 1000), timestamp=at)
        return withdrawn

    @classmethod
    def missed(cls, job: RunsOf, scheduled_at: FireTime, reason: str, at: datetime,
               run_id: UUID | None = None, chain: Chain = SCHEDULED_CHAIN,
               trigger: str = "schedule") -> Run:
        """A fire time that is recorded, not run (misfire policy; a dependent run whose
        upstreams did not all come, or whose job is paused)."""
        spec = job.spec
        run_id = run_id or run_id_for(job.id, scheduled_at)
        return cls._missed_run(run_id=run_id, job_id=job.id,
                               tenant=spec.tenant, queue=spec.queue, handler=spec.handler,
                               scheduled_at=scheduled_at, reason=reason, timestamp=at,
                               trigger=trigger, **chain_fields(chain))

    @classmethod
    def skipped(cls, job: RunsOf, scheduled_at: FireTime, reason: str, at: datetime,
                run_id: UUID | None = None, chain: Chain = SCHEDULED_CHAIN,
                trigger: str = "schedule") -> Run:
        """A fire time that is recorded, not run, because an earlier run is still going."""
        spec = job.spec
        run_id = run_id or run_id_for(job.id, scheduled_at)
        return cls._create(cls.RunSkipped, id=run_id, run_id=run_id, job_id=job.id,
                           tenant=spec.tenant, queue=spec.queue, handler=spec.handler,
                           scheduled_at=scheduled_at, reason=reason, timestamp=at,
                           trigger=trigger, **chain_fields(chain))

    @classmethod
    def _missed_run(cls, **kwargs: Any) -> Run:
        return cls._create(cls.RunMissed, id=kwargs["run_id"], **kwargs)

    class RunMissed(CronlogAggregate.Created):
        job_id: UUID
        run_id: UUID
        tenant: str
        queue: str
        handler: str
        scheduled_at: datetime
        reason: str
        # Dependent runs (v2); older events read with these defaults.
        trigger: str = "schedule"
        logical_time: datetime | None = None
        cascade: str | None = ""
        upstream_run_ids: tuple[UUID, ...] = ()
        depth: int = 0

        def mutate(self, aggregate: Any) -> Any:
            return Run.restore(
                self.originator_id, self.originator_version, self.timestamp, self.timestamp,
                job_id=self.job_id, tenant=self.tenant, queue=self.queue, handler=self.handler,
                scheduled_at=self.scheduled_at, trigger=self.trigger, max_attempts=0,
                status=self.status, attempt=0, attempt_status=ATTEMPT_NONE,
                not_before=self.scheduled_at, attempt_base=0,
                chain=chain_of(self.trigger, self.logical_time, self.cascade,
                               self.upstream_run_ids, self.depth))

        @property
        def status(self) -> str:
            return MISSED

    class RunSkipped(RunMissed):
        @property
        def status(self) -> str:
            return SKIPPED

    @event("AttemptDispatched")
    def _dispatched(self, job_id: UUID, attempt: int, not_before: datetime, timeout_ms: int,
                    timestamp: datetime) -> None:
        self.attempt = attempt
        self.attempt_status = DISPATCHED
        self.not_before = not_before
        self.status = SCHEDULED

    def start(self, attempt: int, worker: str, started_at: datetime, at: datetime) -> bool:
        if attempt != self.attempt or self.attempt_status != DISPATCHED:
            return False
        # The event _started triggers, without the decorator's per-call argument matching
        # (every argument is given by name): once per run, on the owner's hot path.
        self.trigger_event(_ATTEMPT_STARTED, job_id=self.job_id, attempt=attempt,
                           worker=worker, started_at=started_at, timestamp=at)
        return True

    @event("AttemptStarted")
    def _started(self, job_id: UUID, attempt: int, worker: str, started_at: datetime,
                 timestamp: datetime) -> None:
        self.attempt_status = ATTEMPT_RUNNING
        self.status = RUNNING

    def _open(self, attempt: int) -> bool:
        return (attempt == self.attempt and self.status not in TERMINAL_RUN
                and self.attempt_status in (DISPATCHED, ATTEMPT_RUNNING))

    def succeed(self, attempt: int, worker: str, finished_at: datetime, output: bytes,
                truncated: bool, at: datetime, started_at: datetime | None = None) -> bool:
        """Ends the attempt and its run as succeeded. `started_at`: the worker reported the
        attempt's start with its end; when no start was recorded yet, the one event stands
        for both (one record, one update and one decision fewer for a short run)."""
        if not self._open(attempt):
            return False
        if self.attempt_status != DISPATCHED:
            started_at = None
        # As in start: the event _succeeded triggers, every argument given by name.
        self.trigger_event(_ATTEMPT_SUCCEEDED, job_id=self.job_id, attempt=attempt,
                           worker=worker, finished_at=finished_at, output=output,
                           output_truncated=truncated, started_at=started_at, timestamp=at)
        return True

    @event("AttemptSucceeded")
    def _succeeded(self, job_id: UUID, attempt: int, worker: str, finished_at: datetime,
                   output: bytes, output_truncated: bool, timestamp: datetime,
                   started_at: datetime | None = None) -> None:
        # A succeeded attempt ends its run: one event, not two. Logs written before this
        # follow it with RunSucceeded, which changes nothing more.
        self.attempt_status = ATTEMPT_SUCCEEDED
        self.status = SUCCEEDED

    @event("RunSucceeded")
    def _run_succeeded(self, job_id: UUID, timestamp: datetime) -> None:
        # Only in logs written before AttemptSucceeded ended the run; kept to replay them.
        self.status = SUCCEEDED

    def fail(self, attempt: int, worker: str, finished_at: datetime, error: str, output: bytes,
             truncated: bool, at: datetime, policy: RetryPolicy, timeout: timedelta,
             random_unit: float, dispatch_until: datetime | None = None) -> bool:
        """Ends the attempt as failed, then retries per policy or fails the run."""
        if not self._open(attempt):
            return False
        self._failed(job_id=self.job_id, attempt=attempt, worker=worker,
                     finished_at=finished_at, error=error, output=output,
                     output_truncated=truncated, timestamp=at)
        self._retry_or_fail(attempt, error, error_type_of(error),
                            retry_counted_from(finished_at, at), at, policy, timeout,
                            random_unit, dispatch_until)
        return True

    def lose(self, attempt: int, reason: str, at: datetime, policy: RetryPolicy,
             timeout: timedelta, random_unit: float,
             dispatch_until: datetime | None = None) -> bool:
        """The attempt's worker stopped heartbeating (or never reported back)."""
        if not self._open(attempt):
            return False
        self._lost(job_id=self.job_id, attempt=attempt, reason=reason, timestamp=at)
        self._retry_or_fail(attempt, f"Lost: {reason}", "Lost", at, at, policy, timeout,
                            random_unit, dispatch_until)
        return True

    def time_out(self, attempt: int, at: datetime, policy: RetryPolicy, timeout: timedelta,
                 random_unit: float, dispatch_until: datetime | None = None) -> bool:
        """The attempt ran past its timeout."""
        if not self._open(attempt):
            return False
        self._timed_out(job_id=self.job_id, attempt=attempt, timestamp=at)
        self._retry_or_fail(attempt, f"TimedOut: ran past {timeout}", "TimedOut", at, at,
                            policy, timeout, random_unit, dispatch_until)
        return True

    def _retry_or_fail(self, attempt: int, error: str, error_type: str, ended_at: datetime,
                       at: datetime, policy: RetryPolicy, timeout: timedelta,
                       random_unit: float, dispatch_until: datetime | None) -> None:
        """The next attempt per policy (domain/attempt_retry.py), or the run fails."""
        then = after_attempt(policy, attempt - self.attempt_base, error, error_type, ended_at,
                             random_unit, dispatch_until, self.attempt_base)
        if not isinstance(then, Retry):
            self._run_failed(job_id=self.job_id, reason=then.reason, timestamp=at)
        elif then.waiting:
            self._waiting(job_id=self.job_id, attempt=then.attempt, not_before=then.not_before,
                          timestamp=at)
        else:
            self._dispatched(job_id=self.job_id, attempt=then.attempt,
                             not_before=then.not_before,
                             timeout_ms=int(timeout.total_seconds() * 1000), timestamp=at)

    @event("AttemptLost")
    def _lost(self, job_id: UUID, attempt: int, reason: str, timestamp: datetime) -> None:
        self.attempt_status = ATTEMPT_LOST

    @event("AttemptTimedOut")
    def _timed_out(self, job_id: UUID, attempt: int, timestamp: datetime) -> None:
        self.attempt_status = ATTEMPT_TIMED_OUT

    @event("AttemptFailed")
    def _failed(self, job_id: UUID, attempt: int, worker: str, finished_at: datetime,
                error: str, output: bytes, output_truncated: bool, timestamp: datetime) -> None:
        self.attempt_status = ATTEMPT_FAILED


# The event classes @event made, which Run.schedule, Run.start and Run.succeed trigger
# themselves.
_RUN_SCHEDULED: type[Any] = Run.__dict__[RunEvent.SCHEDULED]
_ATTEMPT_STARTED: type[Any] = Run.__dict__[RunEvent.ATTEMPT_STARTED]
_ATTEMPT_SUCCEEDED: type[Any] = Run.__dict__[RunEvent.ATTEMPT_SUCCEEDED]
