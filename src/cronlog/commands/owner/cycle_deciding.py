"""Deciding one owner cycle: the inbox's messages within the budget and each tenant's
share, then the timers, the due jobs and the calendar followers; a message or a job whose
deciding raises is set aside and the cycle decided again without it (invariant 9)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronlog.commands.owner.attempt_tracking import AttemptTracking
from cronlog.commands.owner.calendar_followers import CalendarFollowers
from cronlog.commands.owner.cycle_budget import CycleBudget
from cronlog.commands.owner.cycle_times import CycleTimes
from cronlog.commands.owner.dependencies import Dependencies
from cronlog.commands.owner.firing import Firing
from cronlog.commands.owner.inbox_shares import InboxShares, tenant_of, within_shares
from cronlog.commands.owner.job_commands import ON_JOBS
from cronlog.commands.owner.message_dispatch import MessageDispatch
from cronlog.commands.owner.outbox import Outbox
from cronlog.commands.owner.owner_cycle import Cycle, RunCache
from cronlog.commands.owner.ownership import Ownership
from cronlog.commands.owner.ports import Outgoing, OwnerStore, Topics
from cronlog.commands.owner.set_aside import (
    OUTSIDE_FAILURES,
    JobFailed,
    JobsSetAside,
    MessageFailed,
    SetAside,
    describe,
    job_set_aside_alert,
    set_aside_records,
    unreadable_error,
)
from cronlog.domain.catalogue import Report
from cronlog.ports import InboundMessage

# Worker reports: each names a run the owner must load.
REPORTS = frozenset({Report.ATTEMPT_STARTED, Report.ATTEMPT_FINISHED})


@dataclass(frozen=True)
class Decided:
    """A decided cycle: what it writes, which of the polled messages it left undecided, in
    order, and how many of those for a tenant's share (the rest, for the budget)."""

    cycle: Cycle
    outgoing: list[Outgoing]
    undecided: list[int]
    deferred: int


@dataclass(frozen=True)
class Collaborators:
    """Who decides what: the owner's collaborators, each with its own state."""

    ownership: Ownership
    dispatch: MessageDispatch
    attempts: AttemptTracking
    dependencies: Dependencies
    firing: Firing
    followers: CalendarFollowers
    outbox: Outbox
    set_aside: JobsSetAside


class CycleDecider:
    def __init__(self, owner_id: str, store: OwnerStore, topics: Topics, run_cache: RunCache,
                 collaborators: Collaborators, budget: CycleBudget, times: CycleTimes,
                 lookahead: timedelta, fire_chunk: int,
                 monotonic: Callable[[], float]) -> None:
        self._owner_id = owner_id
        self._store = store
        self._topics = topics
        self._run_cache = run_cache
        self._by = collaborators
        self._budget = budget
        self._times = times
        self._lookahead = lookahead
        self._fire_chunk = fire_chunk
        self._monotonic = monotonic
        # How far ahead the current cycle fires and dispatches at least: the lookahead, or
        # further for the last cycles before leaving on purpose (hand_over).
        self._reach = lookahead

    @contextmanager
    def reaching(self, reach: timedelta) -> Iterator[None]:
        """Cycles within that fire and dispatch everything due within `reach` at least."""
        self._reach = max(self._lookahead, reach)
        try:
            yield
        finally:
            self._reach = self._lookahead

    def decide(self, messages: Sequence[InboundMessage], now: datetime) -> Decided:
        """Decides the cycle (the budget may leave the last messages undecided, a tenant's
        share some in between: commands/owner/inbox_shares.py). A message (or job) whose
        deciding raises is set aside and the cycle decided again without it, from fresh
        state: a failure midway may have left changes in the aggregates. Each round sets
        aside a message or a job, or lets one held-back suspect in again, so the rounds are
        bounded; every round is within the cycle's one budget, and decides at least one
        message."""
        aside = SetAside()
        for _ in range(2 * len(messages) + self._fire_chunk + 2):
            try:
                cycle, undecided, deferred = self._decide(messages, aside.excluded(), now)
                outgoing = self._by.outbox.outgoing(cycle)
            except MessageFailed as failed:
                aside.errors[failed.index] = describe(failed.cause)
            except JobFailed as failed:
                if not aside.blame(failed, messages):
                    self._by.set_aside.add(failed.job_id,
                                           job_set_aside_alert(self._topics, failed, now))
            else:
                if not aside.readmit_next():
                    # A message set aside in an earlier round but not reached by this one
                    # is decided (and set aside) again by a later cycle.
                    left = set(undecided)
                    errors = {i: e for i, e in aside.errors.items() if i not in left}
                    outgoing.extend(set_aside_records(
                        self._topics, self._store.job, messages, errors, now))
                    outgoing.extend(self._by.set_aside.alerts)
                    return Decided(cycle, outgoing, undecided, deferred)
            # Decisions of the dropped round may have changed cached runs in place.
            self._run_cache.clear()
        raise RuntimeError(f"owner {self._owner_id}: a cycle could not be decided in "
                           f"bounded rounds; set aside {sorted(aside.errors)}")

    def _decide(self, messages: Sequence[InboundMessage], excluded: set[int],
                now: datetime) -> tuple[Cycle, list[int], int]:
        """Decides messages while the inbox's share of the budget lasts, each tenant's
        within its own share, then the timers and the due jobs; returns the cycle and the
        messages it left undecided, and how many of those for a tenant's share."""
        by = self._by
        epochs = by.ownership.epochs
        cycle = Cycle(self._store, self._run_cache,
                      dispatch_until=now + max(self._lookahead + self._times.extra(),
                                               self._reach))
        by.followers.begin(cycle, now)
        cycle.prefetch([m for m in messages if m.name in REPORTS and m.partition in epochs])
        cycle.prefetch_commands(within_shares([m for m in messages
                                               if m.name in ON_JOBS
                                               and m.partition in epochs]))
        shares = InboxShares(self._budget.tenant_share, self._monotonic)
        left: list[int] = []
        for index, message in enumerate(messages):
            if index and _apart(messages[index - 1], message) and self._budget.messages_spent():
                left = list(range(index, len(messages)))
                break
            if message.partition not in epochs:
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
                by.dispatch.handle(message, now, cycle)
            except OUTSIDE_FAILURES:
                raise
            except Exception as exc:
                raise MessageFailed(index, exc) from exc
            shares.charge(tenant, began)
        self._decide_own_work(now, cycle)
        return cycle, shares.deferred + left, len(shares.deferred)

    def _decide_own_work(self, now: datetime, cycle: Cycle) -> None:
        """What no message asked for: timers, the due jobs, and the calendar followers."""
        by = self._by
        by.attempts.expire(now, cycle)
        owned = by.ownership.owned
        by.dependencies.expire(owned, now, cycle)
        by.firing.fire_due(owned, now, cycle, self._budget.spent)
        by.firing.release_held(now, cycle)
        by.attempts.dispatch_waiting(now, cycle)
        # After the due jobs: within the followers' share of what is left (at least one).
        by.followers.apply_pending(sorted(owned), self._budget.share_spent(
            self._budget.followers_share))


def _apart(before: InboundMessage, message: InboundMessage) -> bool:
    """Whether two messages handed out one after the other came from different Kafka
    messages: a cycle stops only between whole Kafka messages (a WorkerReports message
    stands for many reports at one offset), so an offset committed never splits one."""
    return before.offset != message.offset or before.partition != message.partition
