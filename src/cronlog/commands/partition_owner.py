"""The partition owner: the only writer for the jobs of the inbox partitions it owns.

Each cycle reads a batch of inbox messages (commands, worker reports), fires the jobs that
are due within the lookahead, and writes all resulting events, dispatches and replies in one
Kafka transaction together with the inbox offsets. Only after that transaction commits are
the events applied to Postgres, fenced by the partition's epoch.

Workers read committed messages only, so a dispatch reaches them when its cycle commits;
when cycles take long, the owner fires further ahead by as much (see CycleTimes), so runs
still reach the workers a lookahead before their time.

A cycle decides for about its budget (CycleBudget) whatever its input: the messages it
polled but had no time for are handed back to the transport, decided first by the next
cycle, and their offsets are not committed until then; due jobs it had no time for fire in
the next cycle.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands import owner_messages as messages
from cronlog.commands.attempt_timers import AttemptTimers
from cronlog.commands.attempt_tracking import AttemptTracking
from cronlog.commands.calendar_followers import CalendarFollowers, FollowersFirst
from cronlog.commands.calendars import Calendars
from cronlog.commands.cycle_budget import TENANT_SHARE, CycleBudget
from cronlog.commands.cycle_tally import tally
from cronlog.commands.cycle_times import CycleTimes
from cronlog.commands.dependencies import Dependencies
from cronlog.commands.firing import Firing
from cronlog.commands.in_flight import IN_FLIGHT_WINDOW
from cronlog.commands.inbox_shares import InboxShares, tenant_of, within_shares
from cronlog.commands.job_commands import ON_JOBS, JobCommands
from cronlog.commands.outbox import Outbox
from cronlog.commands.owner_cycle import Cycle, Handler, RunCache
from cronlog.commands.owner_ports import (
    Deadline,
    DepartedOwnerFence,
    EventRecords,
    LogReplay,
    Outgoing,
    OwnerMetrics,
    OwnerReplaced,
    OwnerStore,
    OwnerTransport,
    Produced,
    Topics,
)
from cronlog.commands.ownership import Ownership
from cronlog.commands.ports import EpochLost, TransactionRejected
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.commands.set_aside import (
    OUTSIDE_FAILURES,
    JobFailed,
    JobsSetAside,
    MessageFailed,
    SetAside,
    correlation_of,
    describe,
    job_set_aside_alert,
    set_aside_records,
    unreadable_error,
)
from cronlog.domain.catalogue import Report
from cronlog.domain.ids import MAX_REQUEST_ID_CHARS, as_uuid, valid_request_id
from cronlog.domain.limits import TenantLimits
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.log_fields import record_fields
from cronlog.ports import Clock, InboundMessage, LogUnavailable, StoreUnavailable

log = logging.getLogger(__name__)


# The fewest messages a cycle asks for after one out of budget.
MIN_POLL = 100

# Worker reports: each names a run the owner must load.
REPORTS = frozenset({Report.ATTEMPT_STARTED, Report.ATTEMPT_FINISHED})


class PartitionOwner:
    def __init__(self, owner_id: str, transport: OwnerTransport, store: OwnerStore,
                 replay: LogReplay, records: EventRecords, clock: Clock, topics: Topics,
                 lookahead: timedelta, poll_timeout: float = 0.1,
                 sparse_lookahead: timedelta | None = None, fire_chunk: int = 500,
                 batch: int = 500,
                 catch_up_window: timedelta = timedelta(seconds=60),
                 rng: random.Random | None = None, limits: TenantLimits | None = None,
                 layout: PartitionLayout | None = None,
                 start_timeout: timedelta = timedelta(minutes=5),
                 monotonic: Callable[[], float] = time.monotonic,
                 metrics: OwnerMetrics | None = None,
                 cycle_budget: timedelta = timedelta(milliseconds=500),
                 tenant_share: float | None = TENANT_SHARE,
                 queues: DeclaredQueues | None = None,
                 fence: DepartedOwnerFence | None = None) -> None:
        """metrics: told each cycle's figures and each takeover (the scheduler's metrics).
        cycle_budget: how long a cycle decides (commands/cycle_budget.py), measured on
        `monotonic`; tenant_share, the part of it one tenant's messages may use
        (commands/inbox_shares.py). queues: what each tenant may use, checked again on
        every create and update (commands/queue_catalog.py). layout: the logical
        partitions over the Kafka partitions the group assigns (domain/partition_layout.py);
        None: each Kafka partition is its own logical one, and tenant shares count one
        partition in all. fence: ends a departed earlier owner's open transaction at a
        takeover (commands/ownership.py)."""
        self.owner_id = owner_id
        self._transport = transport
        self._store = store
        self._clock = clock
        self._topics = topics
        self._lookahead = lookahead
        self._poll_timeout = poll_timeout
        self._fire_chunk = fire_chunk
        self._batch = batch
        # How many messages the next poll asks for: the batch, or after a cycle out of
        # budget about twice what that cycle decided, so that a cycle does not load (the
        # prefetches) and hand back far more than it can decide.
        self._poll_size = batch
        self.run_cache = RunCache()
        # After any failure past the start of a transaction, the owner re-reads the truth
        # (the log and the committed inbox offsets) before it decides anything again.
        self._resync_needed = False
        self._set_aside = JobsSetAside()
        self._dependencies = Dependencies(store, topics, self._set_aside)
        self._monotonic = monotonic
        self._budget = CycleBudget(cycle_budget.total_seconds(), monotonic, tenant_share)
        # A calendar's update reaches its followers by reference; they apply it within the
        # cycles' budget, a due one before it fires (commands/calendar_followers.py).
        self._followers = CalendarFollowers(store, self._set_aside, monotonic)
        self._calendars = Calendars(store, records, topics, self._followers)
        self._commands = JobCommands(store, records, topics, self._dependencies,
                                     self._calendars, queues)
        self._outbox = Outbox(store, records, topics, self._dependencies)
        self._layout = layout
        self._attempts = AttemptTracking(topics, self._set_aside, rng or random.Random(),
                                         start_timeout, fire_chunk)
        self._firing = Firing(FollowersFirst(store, self._followers, self._budget.spent),
                              topics, self._set_aside, limits or TenantLimits(),
                              layout.logical if layout is not None else 1,
                              max(lookahead, sparse_lookahead or lookahead),
                              catch_up_window, fire_chunk,
                              occupancy_window=min(lookahead, IN_FLIGHT_WINDOW))
        self._handler_of: dict[str, Handler] = {**self._commands.handlers(),
                                                **self._attempts.handlers(),
                                                **self._dependencies.handlers(),
                                                **self._calendars.handlers()}
        self._times = CycleTimes(lookahead, monotonic=monotonic, metrics=metrics)
        # How far ahead the current cycle fires and dispatches at least: the lookahead, or
        # further for the last cycles before leaving on purpose (hand_over).
        self._reach = lookahead
        self._ownership = Ownership(owner_id, transport, store, replay, self._forget,
                                    self._adopt, monotonic, metrics, layout, fence)

    # What the collaborators know, for looking at (tests, logs).
    @property
    def epochs(self) -> dict[int, int]:
        """The Kafka partitions this owner holds (caught up), at their anchors' epochs."""
        return self._ownership.epochs

    @property
    def owned(self) -> frozenset[int]:
        """The logical partitions this owner holds (caught up): the due index's unit."""
        return self._ownership.owned

    @property
    def deadlines(self) -> dict[UUID, Deadline]:
        return self._attempts.deadlines

    @property
    def start_deadlines(self) -> AttemptTimers:
        return self._attempts.start_deadlines

    @property
    def holding(self) -> dict[UUID, int]:
        return self._firing.holding

    @property
    def pending_followers(self) -> int:
        """Jobs marked to apply their calendar's newer version (commands/calendar_followers.py)."""
        return len(self._followers.pending)

    @property
    def set_aside_jobs(self) -> JobsSetAside:
        return self._set_aside

    @property
    def resyncing(self) -> bool:
        """A cycle failed (or a take did): nothing is decided until state is re-read."""
        return self._resync_needed

    def in_flight_by_tenant(self) -> Counter[str]:
        """Unfinished runs of the owned partitions by tenant; a copy, safe to take from
        another thread (a metrics scrape)."""
        return self._firing.in_flight.by_tenant()

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
        self.run_cache.clear()
        self._set_aside.clear()
        self._times.restart()
        self._ownership.take(partitions, self._clock.now())

    def _forget(self, partitions: set[int]) -> None:
        self._attempts.forget(partitions)
        self._firing.forget(partitions)
        self._dependencies.forget(partitions)

    def _adopt(self, partitions: Sequence[int], now: datetime) -> None:
        """Loads the runs in flight of partitions just caught up, for the collaborators."""
        # One read for every partition taken, and each job once: a partition's in-flight
        # runs are often many runs of few jobs.
        in_flight = self._store.in_flight_runs(sorted(partitions)) if partitions else []
        needed = {run.job_id for _, run in in_flight
                  if run.attempt_status in ("dispatched", "running")}
        jobs = {job.id: job for job in self._store.load_jobs(sorted(needed))} if needed else {}
        for partition, run in in_flight:
            self._firing.track_in_flight(partition, run)
            self._attempts.track_in_flight(partition, run, jobs.get(run.job_id), now)
        self._dependencies.adopt(sorted(partitions))
        self._followers.adopt(sorted(partitions))

    def revoked(self, partitions: Sequence[int]) -> None:
        self.run_cache.clear()
        self._set_aside.clear()
        self._ownership.forget(partitions)

    def handing_over(self, partitions: Sequence[int], reach: timedelta) -> None:
        """Partitions are about to move to another owner (a scheduler joined or left the
        group): one more cycle, with no new input, that fires and dispatches everything due
        within `reach`, so that their runs are not late while the next owner takes them. A
        failure only leaves them as they were (their next owner fires what came due)."""
        if self._resync_needed or not any(p in self.epochs for p in partitions):
            return
        began = self._monotonic()
        self._reach = max(self._lookahead, reach)
        try:
            written = self._decide_and_commit([], self._clock.now(), began)
        except Exception as exc:
            # Any error: this runs inside the consumer's rebalance callback, where an error
            # would surface from the next poll, outside the cycle's handling. A fenced
            # producer is found again, and raised, by the next cycle's transaction.
            log.warning("owner %s could not hand over partitions %s: %s", self.owner_id,
                        sorted(partitions), exc,
                        exc_info=not isinstance(exc, (TransactionRejected, EpochLost,
                                                      StoreUnavailable, LogUnavailable)))
            self._resync_needed = True
            return
        finally:
            self._reach = self._lookahead
        log.info("owner %s handing over partitions %s: everything due within %.1fs "
                 "dispatched (%d records), in %.2fs", self.owner_id, sorted(partitions),
                 reach.total_seconds(), written, self._monotonic() - began)

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
        messages = self._transport.poll(self._poll_timeout, self._poll_size)
        now, stamped = self._clock.now(), self._monotonic()
        if self._resync_needed:
            self._resync()
            return 0
        try:
            if self._ownership.catching_up:
                self._ownership.catch_up(now)
            if not self.epochs:
                return 0
            written = self._decide_and_commit(messages, now, stamped)
        except TransactionRejected as exc:
            if exc.fenced:
                # Another process owns this one's transactional id: stop writing for good.
                self._ownership.lose_all()
                self._attempts.forget_all()
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
            if self._followers.pending:
                # Followers of updated calendars still to apply their new version (commands/
                # calendar_followers.py): a count that stays up means the owner is behind.
                line += f"; {len(self._followers.pending)} calendar followers pending"
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
        self._budget.begin(self._monotonic())
        cycle, outgoing, undecided, deferred = self._decide_isolated(messages, now)
        decided = len(messages) - len(undecided)
        if undecided:
            # Out of time, or deferred for their tenant's share: decided first by the next
            # cycle, and the transaction commits each partition's offset only up to its
            # first message left.
            self._transport.put_back([messages[i] for i in undecided])
            self._poll_size = min(self._batch, max(2 * decided, MIN_POLL))
        else:
            self._poll_size = self._batch
        if not outgoing and not decided:
            self._followers.committed()  # nothing changed: nothing to lose
            ended = self._monotonic()
            self._times.cycle(stamped, ended, ended, ended, 0,
                              over_budget=self._budget.hit)
            return 0
        committing = self._monotonic()
        produced = self._transport.transact(outgoing)
        committed = self._monotonic()
        self._followers.committed()
        self._set_aside.alerts_sent()
        self._track(produced, now, cycle)
        self._apply(produced)
        self._times.cycle(stamped, committing, committed, self._monotonic(), len(outgoing),
                          decided, tally(produced, self._topics, cycle.runs, cycle.jobs,
                                         now + timedelta(seconds=committed - stamped)),
                          over_budget=self._budget.hit, carried=len(undecided) - deferred,
                          deferred=deferred)
        return len(outgoing)

    def _decide_isolated(self, messages: Sequence[InboundMessage],
                         now: datetime) -> tuple[Cycle, list[Outgoing], list[int], int]:
        """Decides the cycle: returns it, what it writes, which of `messages` it left
        undecided, in order (the budget may leave the last ones, a tenant's share some in
        between: commands/inbox_shares.py), and how many of those for a tenant's share. A
        message (or job) whose
        deciding raises is set aside and the cycle decided again without it, from fresh
        state: a failure midway may have left changes in the aggregates. Each round sets
        aside a message or a job, or lets one held-back suspect in again, so the rounds are
        bounded; every round is within the cycle's one budget, and decides at least one
        message."""
        aside = SetAside()
        for _ in range(2 * len(messages) + self._fire_chunk + 2):
            try:
                cycle, undecided, deferred = self._decide(messages, aside.excluded(), now)
                outgoing = self._outbox.outgoing(cycle)
            except MessageFailed as failed:
                aside.errors[failed.index] = describe(failed.cause)
            except JobFailed as failed:
                if not aside.blame(failed, messages):
                    self._set_aside_job(failed, now)
            else:
                if not aside.readmit_next():
                    # A message set aside in an earlier round but not reached by this one
                    # is decided (and set aside) again by a later cycle.
                    left = set(undecided)
                    errors = {i: e for i, e in aside.errors.items() if i not in left}
                    outgoing.extend(set_aside_records(
                        self._topics, self._store.job, messages, errors, now))
                    outgoing.extend(self._set_aside.alerts)
                    return cycle, outgoing, undecided, deferred
            # Decisions of the dropped round may have changed cached runs in place.
            self.run_cache.clear()
        raise RuntimeError(f"owner {self.owner_id}: a cycle could not be decided in "
                           f"bounded rounds; set aside {sorted(aside.errors)}")

    def _decide(self, messages: Sequence[InboundMessage], excluded: set[int],
                now: datetime) -> tuple[Cycle, list[int], int]:
        """Decides messages while the inbox's share of the budget lasts, each tenant's
        within its own share, then the timers and the due jobs; returns the cycle and the
        messages it left undecided, and how many of those for a tenant's share."""
        cycle = Cycle(self._store, self.run_cache,
                      dispatch_until=now + max(self._lookahead + self._times.extra(),
                                               self._reach))
        self._followers.begin(cycle, now)
        cycle.prefetch([m for m in messages if m.name in REPORTS and m.partition in self.epochs])
        cycle.prefetch_commands(within_shares([m for m in messages
                                               if m.name in ON_JOBS
                                               and m.partition in self.epochs]))
        shares = InboxShares(self._budget.tenant_share, self._monotonic)
        left: list[int] = []
        for index, message in enumerate(messages):
            if index and _apart(messages[index - 1], message) and self._budget.messages_spent():
                left = list(range(index, len(messages)))
                break
            if message.partition not in self.epochs:
                continue
            if shares.holds_back(message):
                shares.defer(index, message)
                continue
            if index in excluded:
                continue
            try:
                tenant = tenant_of(message, cycle)
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:  # its job's row does not load: it fails alone
                raise MessageFailed(index, exc) from exc
            if shares.over(tenant):
                shares.defer(index, message)
                continue
            if unreadable_error(message) is not None:
                raise MessageFailed(index, ValueError(unreadable_error(message)))
            began = self._monotonic()
            try:
                self._handle(message, now, cycle)
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise MessageFailed(index, exc) from exc
            shares.charge(tenant, began)
        self._attempts.expire(now, cycle)
        owned = self._ownership.owned
        self._dependencies.expire(owned, now, cycle)
        self._firing.fire_due(owned, now, cycle, self._budget.spent)
        self._firing.release_held(now, cycle)
        self._attempts.dispatch_waiting(now, cycle)
        # After the due jobs: within the followers' share of what is left (at least one).
        self._followers.apply_pending(sorted(owned), self._budget.share_spent(
            self._budget.followers_share))
        return cycle, shares.deferred + left, len(shares.deferred)

    def _set_aside_job(self, failed: JobFailed, now: datetime) -> None:
        self._set_aside.add(failed.job_id, job_set_aside_alert(self._topics, failed, now))

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
                            message.partition, message.offset,
                            extra=record_fields(message.record))
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

    def _track(self, produced: Sequence[Produced], now: datetime, cycle: Cycle) -> None:
        """Follows what the cycle committed: running attempts, runs in flight, held runs.
        The collaborators know each run and job by its logical partition."""
        produced = self._logical_view(produced)
        partition_of: dict[UUID, int] = {}
        for p in produced:
            if p.topic != self._topics.run_events:
                if (p.topic == self._topics.job_events and self._set_aside
                        and "job_id" in p.record):  # not a calendar's event (issue 20)
                    # A command changed the job: it gets another chance.
                    self._set_aside.discard(as_uuid(p.record["job_id"]))
                continue
            partition_of[as_uuid(p.record["job_id"])] = p.partition
            self._attempts.committed(p, now, cycle)
        self._attempts.cycle_committed(cycle)
        self._dependencies.committed(produced, cycle)
        self.run_cache.remember(list(cycle.runs.values()))
        self._firing.cycle_committed(cycle, partition_of)

    def _logical_view(self, produced: Sequence[Produced]) -> Sequence[Produced]:
        """What the cycle committed, each at its logical partition rather than the Kafka
        partition it was written to (the same with the identity layout: nothing hashed)."""
        layout = self._layout
        if layout is None or layout.is_identity:
            return produced
        # Only the events are tracked by partition; replies, dispatches and alerts keep
        # theirs (nothing hashed for them).
        events = (self._topics.job_events, self._topics.run_events)
        return [replace(p, partition=layout.logical_of_message(p.partition, p.key))
                if p.topic in events else p for p in produced]

    def _apply(self, produced: Sequence[Produced]) -> None:
        # By Kafka partition: each one's offsets and anchor epoch (commands/outbox.py).
        self._outbox.apply(produced, self.epochs)


def _apart(before: InboundMessage, message: InboundMessage) -> bool:
    """Whether two messages handed out one after the other came from different Kafka
    messages: a cycle stops only between whole Kafka messages (a WorkerReports message
    stands for many reports at one offset), so an offset committed never splits one."""
    return before.offset != message.offset or before.partition != message.partition
