"""The partition owner: the only writer for the jobs of the inbox partitions it owns.

Each cycle reads a batch of inbox messages (commands, worker reports), fires the jobs that
are due within the lookahead, and writes all resulting events, dispatches and replies in one
Kafka transaction together with the inbox offsets. Only after that transaction commits are
the events applied to Postgres, fenced by the partition's epoch.

Workers read committed messages only, so a dispatch reaches them when its cycle commits;
when cycles take long, the owner fires further ahead by as much (see CycleTimes), so runs
still reach the workers a lookahead before their time.
"""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands import owner_messages as messages
from cronlog.commands.cycle_times import CycleTimes
from cronlog.commands.in_flight import InFlightRuns
from cronlog.commands.owner_ports import (
    Deadline,
    DueWindow,
    EventRecords,
    LogReplay,
    Outgoing,
    OwnerReplaced,
    OwnerStore,
    OwnerTransport,
    Produced,
    Topics,
)
from cronlog.commands.ports import (
    Clock,
    EpochLost,
    InboundMessage,
    LogUnavailable,
    Record,
    StoreUnavailable,
    TransactionRejected,
)
from cronlog.domain.errors import DomainError
from cronlog.domain.ids import as_uuid, manual_run_id
from cronlog.domain.job import Job
from cronlog.domain.limits import TenantLimits
from cronlog.domain.run import Run, next_to_release

log = logging.getLogger(__name__)


# Domain errors as the gRPC status names the api answers with.
ERROR_CODES = {"InvalidSpec": "INVALID_ARGUMENT", "StaleVersion": "FAILED_PRECONDITION",
               "JobNotActive": "FAILED_PRECONDITION", "JobNotFound": "NOT_FOUND"}


# Worker reports: each names a run the owner must load.
REPORTS = frozenset({"AttemptStartedReport", "AttemptFinishedReport"})


ENDED_ATTEMPT = frozenset({"AttemptSucceeded", "AttemptFailed", "AttemptLost", "AttemptTimedOut",
                           "AttemptCancelled"})


@dataclass
class _Cycle:
    """What one owner cycle has loaded and changed; committed or dropped as a whole."""

    jobs: dict[UUID, Job] = field(default_factory=dict)
    runs: dict[UUID, Run] = field(default_factory=dict)
    replies: list[Outgoing] = field(default_factory=list)
    answered: dict[str, Outgoing] = field(default_factory=dict)
    missing_jobs: set[UUID] = field(default_factory=set)
    missing_runs: set[UUID] = field(default_factory=set)
    # Jobs whose unfinished runs this cycle has gathered (Postgres plus this cycle's runs).
    unfinished: dict[UUID, list[Run]] = field(default_factory=dict)
    alerts: list[Outgoing] = field(default_factory=list)
    # Where a withdrawn attempt was dispatched, when the job's queue changed since.
    dispatched_to: dict[UUID, str] = field(default_factory=dict)


class PartitionOwner:
    def __init__(self, owner_id: str, transport: OwnerTransport, store: OwnerStore,
                 replay: LogReplay, records: EventRecords, clock: Clock, topics: Topics,
                 lookahead: timedelta, poll_timeout: float = 0.1,
                 sparse_lookahead: timedelta | None = None, fire_chunk: int = 500,
                 batch: int = 500,
                 catch_up_window: timedelta = timedelta(seconds=60),
                 rng: random.Random | None = None, limits: TenantLimits | None = None,
                 partitions: int = 1,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.owner_id = owner_id
        self._transport = transport
        self._store = store
        self._replay = replay
        self._records = records
        self._clock = clock
        self._topics = topics
        self._lookahead = lookahead
        self._sparse_lookahead = max(lookahead, sparse_lookahead or lookahead)
        self._poll_timeout = poll_timeout
        self._fire_chunk = fire_chunk
        self._batch = batch
        self._catch_up_window = catch_up_window
        self._rng = rng or random.Random()
        self.epochs: dict[int, int] = {}
        self.deadlines: dict[UUID, Deadline] = {}
        # Jobs with held runs (overlap BUFFER_ONE, serial backfills) of owned partitions,
        # by partition: checked for a release whenever one of their runs ends.
        self.holding: dict[UUID, int] = {}
        self._limits = limits or TenantLimits()
        self._partitions = partitions
        # Unfinished runs of owned partitions, for the tenants' in-flight limits.
        self.in_flight = InFlightRuns()
        # Tenants at their in-flight limit, alerted once per episode.
        self.limited: set[str] = set()
        # Unfinished runs as this owner last committed them. The owner is their only writer,
        # so while it keeps its partitions these are the truth and spare a Postgres read
        # (and a decode) per worker report. Dropped whole whenever the owner re-reads state.
        self.run_cache: OrderedDict[UUID, Run] = OrderedDict()
        # About 1 KB a run. Past this many runs in flight every report costs a Postgres read
        # and a decode, which slows the owner exactly when it is behind: keep it well above
        # what an owner has in flight at its peak.
        self._run_cache_size = 100_000
        # After any failure past the start of a transaction, the owner re-reads the truth
        # (the log and the committed inbox offsets) before it decides anything again.
        self._resync_needed = False
        self._handler_of = self._handlers()
        self._monotonic = monotonic
        self._times = CycleTimes(lookahead, monotonic=monotonic)

    # -- ownership ---------------------------------------------------------------------
    def assigned(self, partitions: Sequence[int]) -> None:
        """Takes a new epoch for each partition and catches up before firing anything."""
        try:
            self._take(partitions)
        except (StoreUnavailable, LogUnavailable) as exc:
            log.warning("taking partitions %s failed, will retry: %s", list(partitions), exc)
            self._resync_needed = True

    def _take(self, partitions: Sequence[int]) -> None:
        self.run_cache.clear()
        self._times.restart()
        now = self._clock.now()
        for partition in partitions:
            self.epochs.pop(partition, None)
            claim = self._store.take_epoch(partition, self.owner_id)
            self._replay.catch_up(claim)
            self._track_in_flight(partition, now)
            self.epochs[partition] = claim.epoch
            log.info("owner %s took partition %d at epoch %d", self.owner_id, partition,
                     claim.epoch)

    def _track_in_flight(self, partition: int, now: datetime) -> None:
        """A new owner has no heartbeats yet: every running attempt gets a full timeout."""
        for key in [k for k, d in self.deadlines.items() if d.partition == partition]:
            del self.deadlines[key]
        for job_id in [j for j, p in self.holding.items() if p == partition]:
            del self.holding[job_id]
        self.in_flight.drop_partitions({partition})
        for run in self._store.in_flight_runs(partition):
            self.in_flight.put(run.id, run.tenant, partition, run.job_id)
            if run.held:
                self.holding[run.job_id] = partition
            if run.attempt_status != "running":
                continue
            job = self._store.job(run.job_id)
            if job is None:
                continue
            self.deadlines[run.id] = Deadline(
                partition, run.attempt, job.spec.heartbeat_timeout,
                now + job.spec.heartbeat_timeout, now + job.spec.timeout)

    def revoked(self, partitions: Sequence[int]) -> None:
        self.run_cache.clear()
        for partition in partitions:
            self.epochs.pop(partition, None)
        for key in [k for k, d in self.deadlines.items() if d.partition in partitions]:
            del self.deadlines[key]
        for job_id in [j for j, p in self.holding.items() if p in partitions]:
            del self.holding[job_id]
        self.in_flight.drop_partitions(set(partitions))

    # -- the cycle -----------------------------------------------------------------------
    def cycle(self) -> int:
        """Runs one cycle; returns how many messages it wrote."""
        messages = self._transport.poll(self._poll_timeout, self._batch)
        now, stamped = self._clock.now(), self._monotonic()
        if self._resync_needed:
            self._resync()
            return 0
        if not self.epochs:
            return 0
        try:
            written = self._decide_and_commit(messages, now, stamped)
        except TransactionRejected as exc:
            if exc.fenced:
                # Another process owns this one's transactional id: stop writing for good.
                self.epochs.clear()
                self.deadlines.clear()
                raise OwnerReplaced(f"owner {self.owner_id} was fenced: {exc}") from exc
            log.warning("cycle not committed (%s); re-reading state", exc)
            self._resync_needed = True
            return 0
        except EpochLost as exc:
            log.warning("epoch lost: %s", exc)
            self._resync_needed = True
            return 0
        except (StoreUnavailable, LogUnavailable) as exc:
            log.warning("state store or log unavailable: %s", exc)
            self._resync_needed = True
            return 0
        reported = self._times.report()
        if reported is not None:
            ran_out, line = reported
            log.log(logging.WARNING if ran_out else logging.INFO, "owner %s: %s",
                    self.owner_id, line)
        return written

    def _resync(self) -> None:
        try:
            self._transport.rewind()
            self._take(sorted(self._transport.assigned))
            self._resync_needed = False
        except (StoreUnavailable, LogUnavailable, TransactionRejected) as exc:
            log.warning("resync failed, will retry: %s", exc)
            self._resync_needed = True
            time.sleep(0.5)

    def _decide_and_commit(self, messages: Sequence[InboundMessage], now: datetime,
                           stamped: float) -> int:
        cycle = _Cycle()
        self._prefetch_runs(messages, cycle)
        for message in messages:
            if message.partition in self.epochs:
                self._handle(message, now, cycle)
        self._expire(now, cycle)
        self._fire_due(now, cycle)
        self._release_held(now, cycle)
        outgoing = self._outgoing(cycle)
        if not outgoing and not messages:
            self._times.cycle(stamped, stamped, stamped, stamped, 0)
            return 0
        committing = self._monotonic()
        produced = self._transport.transact(outgoing)
        committed = self._monotonic()
        self._track(produced, now, cycle)
        self._apply(produced)
        self._times.cycle(stamped, committing, committed, self._monotonic(), len(outgoing))
        return len(outgoing)

    def _handlers(self) -> dict[str, Callable[[Record, datetime, _Cycle], None]]:
        return {
            "CreateJob": self._create_job,
            "UpdateJob": self._update_job,
            "PauseJob": self._pause_job,
            "ResumeJob": self._resume_job,
            "DeleteJob": self._delete_job,
            "TriggerJob": self._trigger_job,
            "BackfillJob": self._backfill_job,
            "CancelRun": self._cancel_run,
            "AttemptStartedReport": self._attempt_started,
            "AttemptFinishedReport": self._attempt_finished,
            "HeartbeatReport": self._heartbeat,
        }

    def _handle(self, message: InboundMessage, now: datetime, cycle: _Cycle) -> None:
        handler = self._handler_of.get(message.name)
        if handler is None:
            request_id = message.record.get("request_id")
            if request_id:
                cycle.replies.append(self._reply(str(request_id), ok=False,
                                                 code="UNIMPLEMENTED",
                                                 message=f"{message.name} is not supported yet"))
            else:
                log.warning("ignoring inbox message %s at %d@%d", message.name,
                            message.partition, message.offset)
            return
        handler(message.record, now, cycle)

    def _reply(self, request_id: str, ok: bool, code: str | None = None,
               message: str | None = None, job_id: UUID | None = None,
               job_version: int | None = None) -> Outgoing:
        return messages.reply(self._topics, request_id, ok, code, message, job_id, job_version)

    def _load_job(self, job_id: UUID, cycle: _Cycle) -> Job | None:
        if job_id in cycle.jobs:
            return cycle.jobs[job_id]
        if job_id in cycle.missing_jobs:
            return None
        job = self._store.job(job_id)
        if job is not None:
            cycle.jobs[job_id] = job
        return job

    def _prefetch_runs(self, messages: Sequence[InboundMessage], cycle: _Cycle) -> None:
        """Loads the runs that worker reports name, and their jobs (for timeouts and
        retries), in one query each instead of one per report."""
        reports = [m for m in messages if m.name in REPORTS and m.partition in self.epochs]
        wanted: set[UUID] = set()
        for report in reports:
            run_id = as_uuid(report.record["run_id"])
            cached = self.run_cache.get(run_id)
            if cached is not None:
                cycle.runs[run_id] = cached
            else:
                wanted.add(run_id)
        if len(wanted) >= 2:
            for run in self._store.load_runs(sorted(wanted)):
                cycle.runs[run.id] = run
            cycle.missing_runs |= wanted - set(cycle.runs)
        if len(reports) < 2:
            return
        jobs = {as_uuid(m.record["job_id"]) for m in reports} - set(cycle.jobs)
        for job in self._store.load_jobs(sorted(jobs)):
            cycle.jobs.setdefault(job.id, job)
        cycle.missing_jobs |= jobs - set(cycle.jobs)

    def _load_run(self, run_id: UUID, cycle: _Cycle) -> Run | None:
        if run_id in cycle.runs:
            return cycle.runs[run_id]
        if run_id in cycle.missing_runs:
            return None
        run = self.run_cache.get(run_id) or self._store.run(run_id)
        if run is not None:
            cycle.runs[run_id] = run
        return run

    def _unfinished(self, job_id: UUID, cycle: _Cycle) -> list[Run]:
        """The job's runs that have not ended, as this cycle has left them. The list is
        shared within the cycle, so every decision on the job sees the ones before it."""
        runs = cycle.unfinished.get(job_id)
        if runs is None:
            runs = [cycle.runs.setdefault(r.id, self.run_cache.get(r.id) or r)
                    for r in self._store.unfinished_runs(job_id)]
            cycle.unfinished[job_id] = runs
        known = {r.id for r in runs}
        runs.extend(r for r in cycle.runs.values() if r.job_id == job_id and r.id not in known)
        runs[:] = [r for r in runs if not r.finished]
        return runs

    def _create_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        request_id = str(record["request_id"])
        job_id = as_uuid(record["job_id"])
        existing = self._load_job(job_id, cycle)
        if existing is not None:
            # The job id derives from the request id: this is a retry; answer as the first time.
            cycle.replies.append(self._reply(request_id, ok=True, job_id=job_id,
                                             job_version=existing.version))
            return
        try:
            spec = self._records.spec_from_record(record["spec"])
            job = Job.create(job_id=job_id, spec=spec, request_id=request_id, at=now)
        except DomainError as exc:
            cycle.replies.append(self._reply(request_id, ok=False, code="INVALID_ARGUMENT",
                                             message=str(exc)))
            return
        cycle.jobs[job_id] = job
        cycle.replies.append(self._reply(request_id, ok=True, job_id=job_id,
                                         job_version=job.version))

    def _change_job(self, record: Record, now: datetime, cycle: _Cycle,
                    change: Callable[[Job, str], None], allow_deleted: bool = False) -> None:
        """A command on an existing job: applied once per request id, answered every time."""
        request_id = str(record["request_id"])
        job_id = as_uuid(record["job_id"])
        if request_id in cycle.answered:
            cycle.replies.append(cycle.answered[request_id])
            return
        done = self._store.request(request_id)
        if done is not None:
            cycle.replies.append(self._reply(request_id, ok=True, job_id=done[0],
                                             job_version=done[1]))
            return
        job = self._load_job(job_id, cycle)
        if job is None or (job.status == "deleted" and not allow_deleted):
            reply = self._reply(request_id, ok=False, code="NOT_FOUND",
                                message=f"job {job_id} not found")
        else:
            try:
                change(job, request_id)
                reply = self._reply(request_id, ok=True, job_id=job_id, job_version=job.version)
            except DomainError as exc:
                reply = self._reply(request_id, ok=False, code=ERROR_CODES.get(
                    type(exc).__name__, "FAILED_PRECONDITION"), message=str(exc))
        cycle.answered[request_id] = reply
        cycle.replies.append(reply)

    def _update_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        spec = self._records.spec_from_record(record["spec"])

        def update(job: Job, request_id: str) -> None:
            old_queue = job.spec.queue
            job.update(spec, request_id, now, expected_version=int(record["expected_version"]))
            # Runs dispatched but not started would run the old spec: withdraw them (from
            # the queue they were sent to) and dispatch them again with the new one.
            for run in self._unfinished(job.id, cycle):
                cycle.dispatched_to.setdefault(run.id, old_queue)
                run.replace_dispatch(f"job updated by request {request_id} before the run "
                                     "started", job.spec.timeout, now)

        self._change_job(record, now, cycle, update)

    def _cancel_pending(self, job: Job, reason: str, now: datetime, cycle: _Cycle) -> None:
        """Cancels the job's runs whose first attempt has not started (pre-enqueued or
        held); runs already going, and their retries, go on."""
        for run in self._unfinished(job.id, cycle):
            if run.status == "scheduled" and run.attempt <= 1:
                run.cancel(reason, now)

    def _pause_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        def pause(job: Job, request_id: str) -> None:
            job.pause(request_id, now)
            self._cancel_pending(job, f"job paused by request {request_id}", now, cycle)

        self._change_job(record, now, cycle, pause)

    def _resume_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        self._change_job(record, now, cycle, lambda job, rid: job.resume(rid, now))

    def _delete_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        def delete(job: Job, request_id: str) -> None:
            if job.status != "deleted":
                job.delete(request_id, now)
                self._cancel_pending(job, f"job deleted by request {request_id}", now, cycle)

        self._change_job(record, now, cycle, delete, allow_deleted=True)

    def _backfill_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        def backfill(job: Job, request_id: str) -> None:
            runs = job.backfill(request_id, record["after"], record["until"], now,
                                self._unfinished(job.id, cycle))
            for run in runs:
                cycle.runs[run.id] = run

        self._change_job(record, now, cycle, backfill)

    def _cancel_run(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        request_id = str(record["request_id"])
        run = self._load_run(as_uuid(record["run_id"]), cycle)
        if run is None or str(run.job_id) != str(record["job_id"]):
            cycle.replies.append(self._reply(request_id, ok=False, code="NOT_FOUND",
                                             message=f"run {record['run_id']} not found"))
            return
        if run.cancel(f"cancelled by request {request_id}", now) is None \
                and run.status != "cancelled":
            # A retried CancelRun finds the run cancelled already and gets the same answer.
            cycle.replies.append(self._reply(
                request_id, ok=False, code="FAILED_PRECONDITION",
                message=f"run {run.id} has already ended: {run.status}"))
            return
        cycle.replies.append(self._reply(request_id, ok=True, job_id=run.job_id))

    def _trigger_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        def trigger(job: Job, request_id: str) -> None:
            run_id = manual_run_id(job.id, request_id)
            if run_id in cycle.runs or self._store.run(run_id) is not None:
                return  # a retried trigger: the run exists already
            run = job.trigger(request_id, now)
            cycle.runs[run.id] = run

        self._change_job(record, now, cycle, trigger)

    def _attempt_started(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        run = self._load_run(as_uuid(record["run_id"]), cycle)
        if run is None:
            log.warning("start report for unknown run %s", record["run_id"])
            return
        run.start(attempt=int(record["attempt"]), worker=str(record["worker"]),
                  started_at=record["started_at"], at=now)

    def _attempt_finished(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        run = self._load_run(as_uuid(record["run_id"]), cycle)
        if run is None:
            log.warning("finish report for unknown run %s", record["run_id"])
            return
        common = {"attempt": int(record["attempt"]), "worker": str(record["worker"]),
                  "finished_at": record["finished_at"], "output": bytes(record["output"]),
                  "truncated": bool(record["output_truncated"]), "at": now}
        if record["outcome"] == "succeeded":
            run.succeed(**common)
            return
        job = self._load_job(run.job_id, cycle)
        if job is None:
            log.error("run %s belongs to unknown job %s", run.id, run.job_id)
            return
        run.fail(error=str(record.get("error") or "failed"), policy=job.spec.retry_policy,
                 timeout=job.spec.timeout, random_unit=self._rng.random(), **common)

    def _heartbeat(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        deadline = self.deadlines.get(as_uuid(record["run_id"]))
        if deadline is not None and deadline.attempt == int(record["attempt"]):
            deadline.heartbeat_due = now + deadline.heartbeat_timeout

    def _expire(self, now: datetime, cycle: _Cycle) -> None:
        """Running attempts whose heartbeats stopped, or that ran past their timeout."""
        for run_id, deadline in list(self.deadlines.items()):
            lost = deadline.heartbeat_due <= now
            if not lost and deadline.timeout_due > now:
                continue
            run = self._load_run(run_id, cycle)
            job = self._load_job(run.job_id, cycle) if run is not None else None
            if run is None or job is None:
                del self.deadlines[run_id]
                continue
            policy, timeout = job.spec.retry_policy, job.spec.timeout
            if lost:
                run.lose(deadline.attempt, f"no heartbeat for {deadline.heartbeat_timeout}",
                         now, policy, timeout, self._rng.random())
            else:
                run.time_out(deadline.attempt, now, policy, timeout, self._rng.random())

    def _track(self, produced: Sequence[Produced], now: datetime, cycle: _Cycle) -> None:
        """Follows committed attempt events to know which attempts are running."""
        partition_of: dict[UUID, int] = {}
        for p in produced:
            if p.topic != self._topics.run_events:
                continue
            job_id = as_uuid(p.record["job_id"])
            partition_of[job_id] = p.partition
            if p.name == "AttemptStarted":
                job = self._load_job(job_id, cycle)
                if job is None:
                    continue
                spec = job.spec
                started: datetime = p.record["started_at"]
                self.deadlines[as_uuid(p.record["run_id"])] = Deadline(
                    p.partition, int(p.record["attempt"]), spec.heartbeat_timeout,
                    now + spec.heartbeat_timeout, max(started, now) + spec.timeout)
            elif p.name in ENDED_ATTEMPT:
                self.deadlines.pop(as_uuid(p.record["run_id"]), None)
        for run in cycle.runs.values():
            run_id = run.id
            if run.finished:
                self.run_cache.pop(run_id, None)
                self.in_flight.discard(run_id)
                continue
            self.run_cache[run_id] = run
            self.run_cache.move_to_end(run_id)
            partition = partition_of.get(run.job_id)
            if partition is not None:
                self.in_flight.put(run_id, run.tenant, partition, run.job_id)
                if run.held:
                    self.holding[run.job_id] = partition
        while len(self.run_cache) > self._run_cache_size:
            self.run_cache.popitem(last=False)
        for job_id, runs in cycle.unfinished.items():
            if not any(r.held for r in runs if not r.finished):
                self.holding.pop(job_id, None)

    def _share(self, tenant: str) -> int:
        return self._limits.in_flight_share(tenant, len(self.epochs), self._partitions)

    def _fire_due(self, now: datetime, cycle: _Cycle) -> None:
        """Fires due jobs, except for tenants at their in-flight limit: those fire times
        wait (the delay shows as start lag, and the tenant is alerted), so a tenant with a
        flood of due runs cannot hold back the others' (see docs/lifecycle.md)."""
        horizon = now + self._lookahead + self._times.extra()
        window = DueWindow(until=horizon,
                           sparse_until=max(horizon, now + self._sparse_lookahead),
                           sparse_gap=self._sparse_lookahead)
        counts = self.in_flight.by_tenant()
        for run in cycle.runs.values():
            known = run.id in self.in_flight
            if known and run.finished:
                counts[run.tenant] -= 1
            elif not known and not run.finished:
                counts[run.tenant] += 1
        full = sorted(t for t, n in counts.items() if n >= self._share(t))
        for due in self._store.due_jobs(self.epochs, window, self._fire_chunk, full):
            job = cycle.jobs.setdefault(due.id, due)
            tenant = job.spec.tenant
            room = self._share(tenant) - counts[tenant]
            if room <= 0:
                self._alert_limited(tenant, job.id, now, cycle)
                continue
            if job.fires_ahead:
                until = (window.sparse_until if job.runs_apart(window.sparse_gap)
                         else horizon)
                runs = job.fire_due(now, until, self._catch_up_window, limit=room)
            elif job.next_fire_at is not None and job.next_fire_at <= now:
                runs = job.fire_due(now, now, self._catch_up_window, limit=room,
                                    unfinished=self._unfinished(job.id, cycle))
            else:
                continue
            for run in runs:
                if run.id not in cycle.runs and not run.finished:
                    counts[tenant] += 1
                cycle.runs[run.id] = run
        for tenant in full:
            # Alerts name a job: one of the tenant's in-flight runs' jobs.
            job_id = self.in_flight.a_job_of(tenant) or next(
                (r.job_id for r in cycle.runs.values() if r.tenant == tenant), None)
            if job_id is not None:
                self._alert_limited(tenant, job_id, now, cycle)
        self.limited = {t for t in self.limited if counts[t] >= self._share(t)}

    def _alert_limited(self, tenant: str, job_id: UUID, now: datetime, cycle: _Cycle) -> None:
        if tenant in self.limited:
            return
        share = self._share(tenant)
        log.warning("tenant %s is at its in-flight limit here (%d runs): its due fire times "
                    "wait", tenant, share)
        self.limited.add(tenant)
        cycle.alerts.append(messages.tenant_limit_alert(self._topics, tenant, job_id, share, now))

    def _release_held(self, now: datetime, cycle: _Cycle) -> None:
        """Dispatches a held run of each job whose other runs have all ended."""
        candidates = {r.job_id for r in cycle.runs.values() if r.held}
        candidates |= {r.job_id for r in cycle.runs.values()
                       if r.finished and r.job_id in self.holding}
        for job_id in candidates:
            job = self._load_job(job_id, cycle)
            if job is None:
                continue
            run = next_to_release(self._unfinished(job_id, cycle))
            if run is not None:
                run.release(job.spec.timeout, now)

    # -- output --------------------------------------------------------------------------
    def _outgoing(self, cycle: _Cycle) -> list[Outgoing]:
        out: list[Outgoing] = []
        for job in cycle.jobs.values():
            for event in job.collect_events():
                name, record = self._records.to_record(event)
                out.append(Outgoing(self._topics.job_events, str(job.id), name, record))
        for run in list(cycle.runs.values()):
            for event in run.collect_events():
                name, record = self._records.to_record(event)
                out.append(Outgoing(self._topics.run_events, str(run.job_id), name, record))
                if name == "RunFailed":
                    out.extend(messages.dead_letter(self._topics, run, record))
                if name == "AttemptDispatched" or (name == "RunScheduled"
                                                   and record.get("attempt")):
                    owner_job = self._load_job(run.job_id, cycle)
                    if owner_job is None:
                        raise LookupError(f"run {run.id} dispatched for unknown job {run.job_id}")
                    out.append(messages.dispatch(self._topics, run, owner_job, record))
                if name == "AttemptCancelled":
                    queue = cycle.dispatched_to.get(run.id) or self._queue_of(run, cycle)
                    out.append(messages.cancel_attempt(self._topics, queue, run, record))
        out.extend(cycle.alerts)
        out.extend(cycle.replies)
        return out

    def _queue_of(self, run: Run, cycle: _Cycle) -> str:
        job = self._load_job(run.job_id, cycle)
        return job.spec.queue if job is not None else run.queue

    def _apply(self, produced: Sequence[Produced]) -> None:
        by_partition: dict[int, tuple[list[Produced], list[Produced]]] = {}
        for p in produced:
            if p.topic == self._topics.job_events:
                by_partition.setdefault(p.partition, ([], []))[0].append(p)
            elif p.topic == self._topics.run_events:
                by_partition.setdefault(p.partition, ([], []))[1].append(p)
        for partition, (job_events, run_events) in by_partition.items():
            epoch = self.epochs.get(partition)
            if epoch is None:
                # Events for a partition this owner no longer holds: the next owner's
                # catch-up applies them from the log.
                continue
            job_events.sort(key=lambda e: e.offset)
            run_events.sort(key=lambda e: e.offset)
            self._store.apply(partition, epoch, job_events, run_events)
