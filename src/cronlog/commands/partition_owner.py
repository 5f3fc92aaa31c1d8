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
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands import owner_messages as messages
from cronlog.commands.attempt_timers import AttemptTimers
from cronlog.commands.cycle_times import CycleTimes
from cronlog.commands.in_flight import InFlightRuns
from cronlog.commands.job_commands import JobCommands
from cronlog.commands.owner_cycle import Cycle, RunCache
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
from cronlog.commands.ports import EpochLost, TransactionRejected
from cronlog.commands.set_aside import (
    JobFailed,
    MessageFailed,
    SetAside,
    correlation_of,
    describe,
    job_set_aside_alert,
    poison_records,
    unreadable_error,
)
from cronlog.commands.takeovers import Takeovers
from cronlog.domain.ids import MAX_REQUEST_ID_CHARS, as_uuid, valid_request_id
from cronlog.domain.job import Job
from cronlog.domain.limits import TenantLimits
from cronlog.domain.run import Run, next_to_release
from cronlog.ports import Clock, InboundMessage, LogUnavailable, Record, StoreUnavailable

log = logging.getLogger(__name__)


# Seconds of catching up per owner cycle while partitions are being taken: the partitions
# already owned fire in between.
CATCH_UP_PER_CYCLE = 0.25


# Worker reports: each names a run the owner must load.
REPORTS = frozenset({"AttemptStartedReport", "AttemptFinishedReport"})


# Failures of the outside world: the cycle is dropped and state re-read, never blamed on the
# message or job being decided when they happened.
OUTSIDE_FAILURES = (StoreUnavailable, LogUnavailable, EpochLost, TransactionRejected)


ENDED_ATTEMPT = frozenset({"AttemptSucceeded", "AttemptFailed", "AttemptLost", "AttemptTimedOut",
                           "AttemptCancelled"})


class PartitionOwner:
    def __init__(self, owner_id: str, transport: OwnerTransport, store: OwnerStore,
                 replay: LogReplay, records: EventRecords, clock: Clock, topics: Topics,
                 lookahead: timedelta, poll_timeout: float = 0.1,
                 sparse_lookahead: timedelta | None = None, fire_chunk: int = 500,
                 batch: int = 500,
                 catch_up_window: timedelta = timedelta(seconds=60),
                 rng: random.Random | None = None, limits: TenantLimits | None = None,
                 partitions: int = 1, start_timeout: timedelta = timedelta(minutes=5),
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
        # Dispatched attempts not started yet: lost when not started within start_timeout.
        self.start_deadlines = AttemptTimers()
        # Attempts due later than the lookahead (AttemptWaiting), by when to dispatch them.
        self.waiting = AttemptTimers()
        self._start_timeout = start_timeout
        # Queues whose attempts were lost unstarted, alerted once until one starts again.
        self.unserved_queues: set[str] = set()
        # Jobs with held runs (overlap BUFFER_ONE, serial backfills) of owned partitions,
        # by partition: checked for a release whenever one of their runs ends.
        self.holding: dict[UUID, int] = {}
        self._limits = limits or TenantLimits()
        self._partitions = partitions
        # Unfinished runs of owned partitions, for the tenants' in-flight limits.
        self.in_flight = InFlightRuns()
        # Tenants at their in-flight limit, alerted once per episode.
        self.limited: set[str] = set()
        self.run_cache = RunCache()
        # After any failure past the start of a transaction, the owner re-reads the truth
        # (the log and the committed inbox offsets) before it decides anything again.
        self._resync_needed = False
        self._commands = JobCommands(store, records, topics)
        self._handler_of = self._handlers()
        # Jobs this owner could not fire or track (JobFailed): skipped until a command
        # changes them or partitions change hands; their alerts go out with the next
        # committed cycle.
        self.set_aside_jobs: set[UUID] = set()
        self._pending_alerts: list[Outgoing] = []
        self._monotonic = monotonic
        self._times = CycleTimes(lookahead, monotonic=monotonic)
        # How far ahead the current cycle fires and dispatches at least: the lookahead, or
        # further for the last cycles before leaving on purpose (hand_over).
        self._reach = lookahead
        self._takeovers = Takeovers(replay, monotonic)

    # -- ownership ---------------------------------------------------------------------
    def assigned(self, partitions: Sequence[int]) -> None:
        """Takes a new epoch for each partition and starts catching up with their log;
        each is fired once it has caught up (invariant 3)."""
        try:
            self._take(partitions)
        except (StoreUnavailable, LogUnavailable) as exc:
            log.warning("taking partitions %s failed, will retry: %s", list(partitions), exc)
            self._resync_needed = True

    def _take(self, partitions: Sequence[int]) -> None:
        began = self._monotonic()
        self.run_cache.clear()
        self.set_aside_jobs.clear()
        self._times.restart()
        self._forget(partitions)
        # Their inbox waits until they have caught up: nothing of theirs is decided, or
        # committed as consumed, before.
        self._transport.hold(partitions)
        # Every partition at once: one Postgres round trip for the epochs, one reader of the
        # log for the catch-up.
        claims = self._store.take_epochs(partitions, self.owner_id)
        self._takeovers.start(claims, since=began)
        # Those with little to replay are owned at once; the others catch up over the next
        # cycles, a while each, so the partitions already owned keep firing.
        self._catch_up(self._clock.now())

    def _catch_up(self, now: datetime) -> None:
        """Applies more of the claimed partitions' log; those caught up are this owner's
        from now on. Bounded per cycle, so the partitions already owned keep firing."""
        for caught_up in self._takeovers.advance(CATCH_UP_PER_CYCLE):
            claims = caught_up.claims
            partitions = [c.partition for c in claims]
            self._track_in_flight(partitions, now)
            for claim in claims:
                self.epochs[claim.partition] = claim.epoch
            # Told only now: the api answers "ready" when every partition's group member
            # has caught up (nothing answers ready before it is).
            self._store.caught_up(claims, self._transport.group_member)
            self._transport.release(partitions)
            log.info("owner %s took partitions %s at epochs %s in %.2fs", self.owner_id,
                     partitions, sorted({c.epoch for c in claims}), caught_up.seconds)

    def _forget(self, partitions: Collection[int]) -> None:
        """Drops what this owner knew of partitions it no longer owns or takes anew."""
        gone = set(partitions)
        self._takeovers.drop(gone)
        for partition in gone:
            self.epochs.pop(partition, None)
        for key in [k for k, d in self.deadlines.items() if d.partition in gone]:
            del self.deadlines[key]
        for job_id in [j for j, p in self.holding.items() if p in gone]:
            del self.holding[job_id]
        self.in_flight.drop_partitions(gone)
        self.start_deadlines.drop_partitions(gone)
        self.waiting.drop_partitions(gone)

    def _track_in_flight(self, partitions: Sequence[int], now: datetime) -> None:
        """A new owner has no heartbeats yet: every running attempt gets a full timeout."""
        # One read for every partition taken, and each job once: a partition's in-flight
        # runs are often many runs of few jobs.
        in_flight = self._store.in_flight_runs(sorted(partitions)) if partitions else []
        needed = {run.job_id for _, run in in_flight
                  if run.attempt_status in ("dispatched", "running")}
        jobs = {job.id: job for job in self._store.load_jobs(sorted(needed))} if needed else {}
        for partition, run in in_flight:
            self.in_flight.put(run.id, run.tenant, partition, run.job_id)
            if run.held:
                self.holding[run.job_id] = partition
            if run.attempt_status == "waiting":
                self.waiting.expect(run.id, run.attempt, partition, run.not_before)
            if run.attempt_status not in ("dispatched", "running"):
                continue
            job = jobs.get(run.job_id)
            if run.attempt_status == "dispatched":
                start_timeout = (job.spec.start_timeout if job is not None else None) \
                    or self._start_timeout
                self.start_deadlines.expect(run.id, run.attempt, partition,
                                            max(run.not_before, now) + start_timeout)
                continue
            if job is None:
                continue
            self.deadlines[run.id] = Deadline(
                partition, run.attempt, job.spec.heartbeat_timeout,
                now + job.spec.heartbeat_timeout, now + job.spec.timeout)

    def revoked(self, partitions: Sequence[int]) -> None:
        self.run_cache.clear()
        self.set_aside_jobs.clear()
        self._forget(partitions)

    def hand_over(self, reach: timedelta, within: float) -> None:
        """Before leaving on purpose (SIGTERM, a rolling restart): cycles that fire and
        dispatch everything due within `reach`, so that the runs of the partitions that
        move are not late while their next owner takes them. Bounded by `within` seconds;
        the partitions are released by leaving the group afterwards."""
        if not self.epochs:
            return
        began = self._monotonic()
        self._reach = max(self._lookahead, reach)
        try:
            while self._monotonic() - began < within:
                # A cycle that wrote nothing had nothing more due within the reach.
                if self.cycle() == 0 or not self.epochs:
                    break
        finally:
            self._reach = self._lookahead
        log.info("owner %s handed over partitions %s: everything due within %.1fs "
                 "dispatched, in %.2fs", self.owner_id, sorted(self.epochs),
                 reach.total_seconds(), self._monotonic() - began)

    # -- the cycle -----------------------------------------------------------------------
    def cycle(self) -> int:
        """Runs one cycle; returns how many messages it wrote."""
        messages = self._transport.poll(self._poll_timeout, self._batch)
        now, stamped = self._clock.now(), self._monotonic()
        if self._resync_needed:
            self._resync()
            return 0
        try:
            if self._takeovers:
                self._catch_up(now)
            if not self.epochs:
                return 0
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
        cycle, outgoing = self._decide_isolated(messages, now)
        if not outgoing and not messages:
            self._times.cycle(stamped, stamped, stamped, stamped, 0)
            return 0
        committing = self._monotonic()
        produced = self._transport.transact(outgoing)
        committed = self._monotonic()
        self._pending_alerts.clear()
        self._track(produced, now, cycle)
        self._apply(produced)
        self._times.cycle(stamped, committing, committed, self._monotonic(), len(outgoing))
        return len(outgoing)

    def _decide_isolated(self, messages: Sequence[InboundMessage],
                         now: datetime) -> tuple[Cycle, list[Outgoing]]:
        """Decides the cycle. A message (or job) whose deciding raises is set aside and the
        cycle decided again without it, from fresh state: a failure midway may have left
        changes in the aggregates. Each round sets aside a message or a job, or lets one
        held-back suspect in again, so the rounds are bounded."""
        aside = SetAside()
        for _ in range(2 * len(messages) + self._fire_chunk + 2):
            try:
                cycle = self._decide(messages, aside.excluded(), now)
                outgoing = self._outgoing(cycle)
            except MessageFailed as failed:
                aside.errors[failed.index] = describe(failed.cause)
            except JobFailed as failed:
                if not aside.blame(failed, messages):
                    self._set_aside_job(failed, now)
            else:
                if not aside.readmit_next():
                    outgoing.extend(self._set_aside_outgoing(messages, aside.errors, now))
                    outgoing.extend(self._pending_alerts)
                    return cycle, outgoing
            # Decisions of the dropped round may have changed cached runs in place.
            self.run_cache.clear()
        raise RuntimeError(f"owner {self.owner_id}: a cycle could not be decided in "
                           f"bounded rounds; set aside {sorted(aside.errors)}")

    def _decide(self, messages: Sequence[InboundMessage], excluded: set[int],
                now: datetime) -> Cycle:
        cycle = Cycle(self._store, self.run_cache,
                      dispatch_until=now + max(self._lookahead + self._times.extra(),
                                               self._reach))
        cycle.prefetch([m for m in messages if m.name in REPORTS and m.partition in self.epochs])
        for index, message in enumerate(messages):
            if message.partition not in self.epochs or index in excluded:
                continue
            if unreadable_error(message) is not None:
                raise MessageFailed(index, ValueError(unreadable_error(message)))
            try:
                self._handle(message, now, cycle)
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise MessageFailed(index, exc) from exc
        self._expire(now, cycle)
        self._fire_due(now, cycle)
        self._release_held(now, cycle)
        self._dispatch_waiting(now, cycle)
        return cycle

    def _set_aside_job(self, failed: JobFailed, now: datetime) -> None:
        self.set_aside_jobs.add(failed.job_id)
        self._pending_alerts.append(job_set_aside_alert(self._topics, failed, now))

    def _set_aside_outgoing(self, messages: Sequence[InboundMessage], errors: dict[int, str],
                            now: datetime) -> list[Outgoing]:
        out: list[Outgoing] = []
        for index, error in sorted(errors.items()):
            message = messages[index]
            out.extend(poison_records(self._topics, message, error,
                                      self._tenant_named_by(message), now))
            request_id = message.record.get("request_id")
            if request_id:
                out.append(self._replying(
                    str(request_id)[:MAX_REQUEST_ID_CHARS], ok=False, code="INTERNAL",
                    message=f"the scheduler could not apply {message.name} and set it aside "
                            f"(operators see it on the poison topic): {error}",
                    correlation_id=correlation_of(message)))
        return out

    def _tenant_named_by(self, message: InboundMessage) -> str | None:
        spec = message.record.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("tenant"), str):
            return str(spec["tenant"])[:64]
        try:
            job = self._store.job(as_uuid(message.record["job_id"]))
        except OUTSIDE_FAILURES:
            raise
        except Exception:  # a message naming no readable job has no tenant
            return None
        return job.spec.tenant if job is not None else None

    def _handlers(self) -> dict[str, Callable[[Record, datetime, Cycle], None]]:
        return {
            **self._commands.handlers(),
            "AttemptStartedReport": self._attempt_started,
            "AttemptFinishedReport": self._attempt_finished,
            "HeartbeatReport": self._heartbeat,
        }

    def _replying(self, request_id: str, ok: bool, code: str | None = None,
                  message: str | None = None, correlation_id: str | None = None,
                  error_field: str | None = None) -> Outgoing:
        return messages.reply(self._topics, request_id, ok, code, message, None, None,
                              correlation_id, error_field)

    def _handle(self, message: InboundMessage, now: datetime, cycle: Cycle) -> None:
        handler = self._handler_of.get(message.name)
        if handler is None:
            request_id = message.record.get("request_id")
            if request_id:
                cycle.replies.append(self._replying(str(request_id), ok=False,
                                                 code="UNIMPLEMENTED",
                                                 message=f"{message.name} is not supported yet"))
            else:
                log.warning("ignoring inbox message %s at %d@%d", message.name,
                            message.partition, message.offset)
            return
        request_id = message.record.get("request_id")
        if request_id is not None and not valid_request_id(request_id):
            # Only a writer that bypasses the api sends one; answered, never stored.
            cycle.replies.append(self._replying(
                str(request_id)[:MAX_REQUEST_ID_CHARS], ok=False, code="INVALID_ARGUMENT",
                message="request_id: 1 to 200 printable characters are required",
                correlation_id=correlation_of(message), error_field="request_id"))
            return
        handler(message.record, now, cycle)

    def _attempt_started(self, record: Record, now: datetime, cycle: Cycle) -> None:
        run = cycle.run(as_uuid(record["run_id"]))
        if run is None:
            log.warning("start report for unknown run %s", record["run_id"])
            return
        run.start(attempt=int(record["attempt"]), worker=str(record["worker"]),
                  started_at=record["started_at"], at=now)

    def _attempt_finished(self, record: Record, now: datetime, cycle: Cycle) -> None:
        run = cycle.run(as_uuid(record["run_id"]))
        if run is None:
            log.warning("finish report for unknown run %s", record["run_id"])
            return
        common = {"attempt": int(record["attempt"]), "worker": str(record["worker"]),
                  "finished_at": record["finished_at"], "output": bytes(record["output"]),
                  "truncated": bool(record["output_truncated"]), "at": now}
        if record["outcome"] == "succeeded":
            run.succeed(**common)
            return
        job = cycle.job(run.job_id)
        if job is None:
            log.error("run %s belongs to unknown job %s", run.id, run.job_id)
            return
        run.fail(error=str(record.get("error") or "failed"), policy=job.spec.retry_policy,
                 timeout=job.spec.timeout, random_unit=self._rng.random(),
                 dispatch_until=cycle.dispatch_until, **common)

    def _heartbeat(self, record: Record, now: datetime, cycle: Cycle) -> None:
        deadline = self.deadlines.get(as_uuid(record["run_id"]))
        if deadline is not None and deadline.attempt == int(record["attempt"]):
            deadline.heartbeat_due = now + deadline.heartbeat_timeout

    def _expire(self, now: datetime, cycle: Cycle) -> None:
        """Running attempts whose heartbeats stopped, or that ran past their timeout."""
        for run_id, deadline in list(self.deadlines.items()):
            lost = deadline.heartbeat_due <= now
            if not lost and deadline.timeout_due > now:
                continue
            run = cycle.run(run_id)
            job = cycle.job(run.job_id) if run is not None else None
            if run is None or job is None:
                del self.deadlines[run_id]
                continue
            if job.id in self.set_aside_jobs:
                continue
            with self._blaming(job):
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
        # At most a chunk a cycle: a queue unserved for a while must not make one cycle
        # (one transaction) lose every attempt it held.
        for overdue in self.start_deadlines.overdue(now)[:self._fire_chunk]:
            run = cycle.run(overdue.run_id)
            job = cycle.job(run.job_id) if run is not None else None
            if run is None or job is None or run.attempt != overdue.attempt \
                    or run.attempt_status != "dispatched":
                self.start_deadlines.settled(overdue.run_id)
                continue
            if job.id in self.set_aside_jobs:
                continue
            with self._blaming(job):
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

    def _track(self, produced: Sequence[Produced], now: datetime, cycle: Cycle) -> None:
        """Follows committed attempt events to know which attempts are running."""
        partition_of: dict[UUID, int] = {}
        starts = self.start_deadlines
        for p in produced:
            if p.topic != self._topics.run_events:
                if p.topic == self._topics.job_events and self.set_aside_jobs:
                    # A command changed the job: it gets another chance.
                    self.set_aside_jobs.discard(as_uuid(p.record["job_id"]))
                continue
            job_id = as_uuid(p.record["job_id"])
            partition_of[job_id] = p.partition
            name = p.name
            if name == "AttemptStarted":
                run_id = as_uuid(p.record["run_id"])
                starts.settled(run_id)
                if self.unserved_queues and run_id in cycle.runs:
                    self.unserved_queues.discard(cycle.runs[run_id].queue)
                job = cycle.job(job_id)
                if job is None:
                    continue
                spec = job.spec
                started: datetime = p.record["started_at"]
                self.deadlines[run_id] = Deadline(
                    p.partition, int(p.record["attempt"]), spec.heartbeat_timeout,
                    now + spec.heartbeat_timeout, max(started, now) + spec.timeout)
            elif name == "AttemptWaiting":
                self.waiting.expect(as_uuid(p.record["run_id"]), int(p.record["attempt"]),
                                    p.partition, p.record["not_before"])
            elif name == "AttemptDispatched" or (name == "RunScheduled"
                                                 and p.record.get("attempt")):
                self.waiting.settled(as_uuid(p.record["run_id"]))
                dispatched_job = cycle.job(job_id)
                start_timeout = (dispatched_job.spec.start_timeout
                                 if dispatched_job is not None else None) or self._start_timeout
                # From its time, or from now for a run dispatched after its time.
                starts.expect(as_uuid(p.record["run_id"]), int(p.record["attempt"]),
                              p.partition, max(p.record["not_before"], now) + start_timeout)
            elif name in ENDED_ATTEMPT:
                run_id = as_uuid(p.record["run_id"])
                self.deadlines.pop(run_id, None)
                starts.settled(run_id)
                self.waiting.settled(run_id)
        self.unserved_queues |= cycle.alerted_queues
        self.run_cache.remember(list(cycle.runs.values()))
        for run in cycle.runs.values():
            run_id = run.id
            if run.finished:
                self.in_flight.discard(run_id)
                starts.settled(run_id)
                self.waiting.settled(run_id)
                continue
            partition = partition_of.get(run.job_id)
            if partition is not None:
                self.in_flight.put(run_id, run.tenant, partition, run.job_id)
                if run.held:
                    self.holding[run.job_id] = partition
        for job_id, runs in cycle.unfinished_of.items():
            if not any(r.held for r in runs if not r.finished):
                self.holding.pop(job_id, None)

    def _share(self, tenant: str) -> int:
        return self._limits.in_flight_share(tenant, len(self.epochs), self._partitions)

    def _fire_due(self, now: datetime, cycle: Cycle) -> None:
        """Fires due jobs, except for tenants at their in-flight limit: those fire times
        wait (the delay shows as start lag, and the tenant is alerted), so a tenant with a
        flood of due runs cannot hold back the others' (see docs/lifecycle.md)."""
        horizon = cycle.dispatch_until
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
            if due.id in self.set_aside_jobs:
                continue
            job = cycle.jobs.setdefault(due.id, due)
            tenant = job.spec.tenant
            room = self._share(tenant) - counts[tenant]
            if room <= 0:
                self._alert_limited(tenant, job.id, now, cycle)
                continue
            try:  # inline, not _blaming: this runs for every due job
                if job.fires_ahead:
                    until = (window.sparse_until if job.runs_apart(window.sparse_gap)
                             else horizon)
                    runs = job.fire_due(now, until, self._catch_up_window, limit=room)
                elif job.next_fire_at is not None and job.next_fire_at <= now:
                    runs = job.fire_due(now, now, self._catch_up_window, limit=room,
                                        unfinished=cycle.unfinished(job.id))
                else:
                    continue
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise JobFailed(job.id, tenant, exc) from exc
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

    def _alert_limited(self, tenant: str, job_id: UUID, now: datetime, cycle: Cycle) -> None:
        if tenant in self.limited:
            return
        share = self._share(tenant)
        log.warning("tenant %s is at its in-flight limit here (%d runs): its due fire times "
                    "wait", tenant, share)
        self.limited.add(tenant)
        cycle.alerts.append(messages.tenant_limit_alert(self._topics, tenant, job_id, share, now))

    def _release_held(self, now: datetime, cycle: Cycle) -> None:
        """Dispatches a held run of each job whose other runs have all ended."""
        candidates = {r.job_id for r in cycle.runs.values() if r.held}
        candidates |= {r.job_id for r in cycle.runs.values()
                       if r.finished and r.job_id in self.holding}
        for job_id in candidates:
            job = cycle.job(job_id)
            if job is None or job_id in self.set_aside_jobs:
                continue
            with self._blaming(job):
                run = next_to_release(cycle.unfinished(job_id))
                if run is not None:
                    run.release(job.spec.timeout, now, cycle.dispatch_until)

    def _dispatch_waiting(self, now: datetime, cycle: Cycle) -> None:
        """Dispatches the waiting attempts (retries after a backoff, spread runs) whose time
        has come within the lookahead: workers then hold no dispatch for longer."""
        for due in self.waiting.overdue(cycle.dispatch_until)[:self._fire_chunk]:
            run = cycle.run(due.run_id)
            job = cycle.job(run.job_id) if run is not None else None
            if run is None or job is None or run.attempt != due.attempt \
                    or run.attempt_status != "waiting":
                self.waiting.settled(due.run_id)
                continue
            if job.id in self.set_aside_jobs:
                continue
            with self._blaming(job):
                run.dispatch_waiting(job.spec.timeout, now)

    # -- output --------------------------------------------------------------------------
    @contextmanager
    def _blaming(self, job: Job) -> Iterator[None]:
        """Whatever deciding something of `job` raises (but the outside world's failures)
        is that job's: JobFailed, which the cycle answers without failing the others."""
        try:
            yield
        except OUTSIDE_FAILURES:
            raise
        except Exception as exc:
            raise JobFailed(job.id, job.spec.tenant, exc) from exc

    def _outgoing(self, cycle: Cycle) -> list[Outgoing]:
        out: list[Outgoing] = []
        # try/except inline rather than _blaming: this runs for every job and run a cycle
        # touches, and a context manager costs a generator each time.
        for job in cycle.jobs.values():
            try:
                for event in job.collect_events():
                    name, record = self._records.to_record(event)
                    out.append(Outgoing(self._topics.job_events, str(job.id), name, record))
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise JobFailed(job.id, job.spec.tenant, exc) from exc
        for run in list(cycle.runs.values()):
            try:
                out.extend(self._run_outgoing(run, cycle))
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise JobFailed(run.job_id, run.tenant, exc) from exc
        out.extend(cycle.alerts)
        out.extend(cycle.replies)
        return out

    def _run_outgoing(self, run: Run, cycle: Cycle) -> list[Outgoing]:
        out: list[Outgoing] = []
        for event in run.collect_events():
            name, record = self._records.to_record(event)
            out.append(Outgoing(self._topics.run_events, str(run.job_id), name, record))
            if name == "RunFailed":
                out.extend(messages.dead_letter(self._topics, run, record))
            if name == "AttemptDispatched" or (name == "RunScheduled" and record.get("attempt")):
                owner_job = cycle.job(run.job_id)
                if owner_job is None:
                    raise LookupError(f"run {run.id} dispatched for unknown job {run.job_id}")
                out.append(messages.dispatch(self._topics, run, owner_job, record))
            if name == "AttemptCancelled" or (name == "AttemptLost"
                                              and run.id in cycle.never_started):
                # A worker still holding the dispatch must drop it, not start it late.
                queue = cycle.dispatched_to.get(run.id) or self._queue_of(run, cycle)
                out.append(messages.cancel_attempt(self._topics, queue, run, record))
        return out

    def _queue_of(self, run: Run, cycle: Cycle) -> str:
        job = cycle.job(run.job_id)
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
