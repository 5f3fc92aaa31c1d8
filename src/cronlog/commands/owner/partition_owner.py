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

The owner itself only runs the cycle, read -> decide -> commit -> apply, and delegates the
rest: reading is the transport's poll; deciding is CycleDecider's (commands/
cycle_deciding.py, each message to its handler by MessageDispatch); committing is the
transport's transaction; applying is OwnerTracking's (what the collaborators follow,
commands/owner/owner_tracking.py) and the Outbox's (Postgres). Taking and losing partitions is
Ownership's (commands/owner/ownership.py).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands.owner.attempt_timers import AttemptTimers
from cronlog.commands.owner.attempt_tracking import AttemptTracking
from cronlog.commands.owner.calendar_followers import CalendarFollowers, FollowersFirst
from cronlog.commands.owner.calendars import Calendars
from cronlog.commands.owner.channels import Channels
from cronlog.commands.owner.cycle_budget import TENANT_SHARE, CycleBudget
from cronlog.commands.owner.cycle_deciding import Collaborators, CycleDecider
from cronlog.commands.owner.cycle_tally import tally
from cronlog.commands.owner.cycle_times import CycleTimes
from cronlog.commands.owner.dependencies import Dependencies
from cronlog.commands.owner.firing import Firing
from cronlog.commands.owner.in_flight import IN_FLIGHT_WINDOW
from cronlog.commands.owner.job_commands import JobCommands
from cronlog.commands.owner.message_dispatch import MessageDispatch
from cronlog.commands.owner.outbox import Outbox
from cronlog.commands.owner.owner_cycle import Cycle, Handler, RunCache
from cronlog.commands.owner.owner_tracking import OwnerTracking
from cronlog.commands.owner.ownership import Ownership
from cronlog.commands.owner.ports import (
    Deadline,
    DepartedOwnerFence,
    EpochLost,
    EventRecords,
    LogReplay,
    OwnerMetrics,
    OwnerReplaced,
    OwnerStore,
    OwnerTransport,
    Produced,
    Topics,
    TransactionRejected,
)
from cronlog.commands.owner.set_aside import JobsSetAside
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.limits import TenantLimits
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.ports import Clock, InboundMessage, LogUnavailable, StoreUnavailable

log = logging.getLogger(__name__)


# The fewest messages a cycle asks for after one out of budget.
MIN_POLL = 100


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
        cycle_budget: how long a cycle decides (commands/owner/cycle_budget.py), measured on
        `monotonic`; tenant_share, the part of it one tenant's messages may use
        (commands/owner/inbox_shares.py). queues: what each tenant may use, checked again on
        every create and update (commands/queue_catalog.py). layout: the logical
        partitions over the Kafka partitions the group assigns (domain/partition_layout.py);
        None: each Kafka partition is its own logical one, and tenant shares count one
        partition in all. fence: ends a departed earlier owner's open transaction at a
        takeover (commands/owner/ownership.py)."""
        self.owner_id = owner_id
        self._transport = transport
        self._clock = clock
        self._topics = topics
        self._poll_timeout = poll_timeout
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
        # cycles' budget, a due one before it fires (commands/owner/calendar_followers.py).
        self._followers = CalendarFollowers(store, self._set_aside, monotonic)
        self._calendars = Calendars(store, records, topics, self._followers)
        self._commands = JobCommands(store, records, topics, self._dependencies,
                                     self._calendars, queues)
        self._outbox = Outbox(store, records, topics, self._dependencies)
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
                                                **self._calendars.handlers(),
                                                **Channels(store, records, topics).handlers()}
        self._times = CycleTimes(lookahead, monotonic=monotonic, metrics=metrics)
        self._tracking = OwnerTracking(store, topics, layout, self.run_cache, self._set_aside,
                                       self._attempts, self._firing, self._dependencies,
                                       self._followers)
        self._ownership = Ownership(owner_id, transport, store, replay, self._tracking.forget,
                                    self._tracking.adopt, monotonic, metrics, layout, fence)
        self._decider = CycleDecider(
            owner_id, store, topics, self.run_cache,
            Collaborators(self._ownership, MessageDispatch(topics, self._handler_of),
                          self._attempts, self._dependencies, self._firing, self._followers,
                          self._outbox, self._set_aside),
            self._budget, self._times, lookahead, fire_chunk, monotonic)

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
        """Jobs marked to apply their calendar's newer version (commands/owner/calendar_followers.py)."""
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
        try:
            with self._decider.reaching(reach):
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
        with self._decider.reaching(reach):
            while self._monotonic() - began < within:
                # A cycle that wrote nothing had nothing more due within the reach.
                if self.cycle() == 0 or not self.epochs:
                    break
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
        """Decides `messages` (polled at `stamped`), commits what the cycle writes in one
        Kafka transaction and applies it; returns how many messages it wrote."""
        self._budget.begin(self._monotonic())
        decision = self._decider.decide(messages, now)
        decided = len(messages) - len(decision.undecided)
        self._hand_back(messages, decision.undecided, decided)
        if not decision.outgoing and not decided:
            self._followers.committed()  # nothing changed: nothing to lose
            ended = self._monotonic()
            self._times.cycle(stamped, ended, ended, ended, 0,
                              over_budget=self._budget.hit)
            return 0
        committing = self._monotonic()
        produced = self._transport.transact(decision.outgoing)
        committed = self._monotonic()
        self._apply(produced, now, decision.cycle)
        self._times.cycle(stamped, committing, committed, self._monotonic(),
                          len(decision.outgoing), decided,
                          tally(produced, self._topics, decision.cycle.runs, decision.cycle.jobs,
                                now + timedelta(seconds=committed - stamped)),
                          over_budget=self._budget.hit,
                          carried=len(decision.undecided) - decision.deferred,
                          deferred=decision.deferred)
        return len(decision.outgoing)

    def _hand_back(self, messages: Sequence[InboundMessage], undecided: list[int],
                   decided: int) -> None:
        if undecided:
            # Out of time, or deferred for their tenant's share: decided first by the next
            # cycle, and the transaction commits each partition's offset only up to its
            # first message left.
            self._transport.put_back([messages[i] for i in undecided])
            self._poll_size = min(self._batch, max(2 * decided, MIN_POLL))
        else:
            self._poll_size = self._batch

    def _apply(self, produced: Sequence[Produced], now: datetime, cycle: Cycle) -> None:
        """After the commit: the collaborators follow it, and Postgres gets its events."""
        self._followers.committed()
        self._set_aside.alerts_sent()
        self._tracking.committed(produced, now, cycle)
        # By Kafka partition: each one's offsets and anchor epoch (commands/owner/outbox.py).
        self._outbox.apply(produced, self.epochs)
