"""Fan-in: how the upstream ends of one dependent job meet, one logical time at a time.

A FanIn is a pure fold over the upstream ends its owner records (JobUpstreamRecorded on the
dependent's job-events) and the times they were recorded at: folding the same records at
the same times gives the same state and the same decisions, which is how a new owner gets
it back after a takeover (docs/dependencies.md). Every call first settles the slots whose
wait window has passed by `now`, so an end recorded after its slot's deadline is late
whenever the fold is run again.

Memory is bounded: at most `max_waiting` logical times wait (beyond it the oldest is
recorded missed, never dropped), and settled ones are remembered, to tell a duplicate or a
late end from a new one, for one wait window and at most `max_settled` of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from uuid import UUID

from cronlog.domain.dependency import (
    MAX_CHAIN_DEPTH,
    ChainSlot,
    Dependency,
    UpstreamEnd,
    dependent_run_id,
    meets,
    require_upstream_end,
)

MAX_WAITING_SLOTS = 1000
MAX_SETTLED_SLOTS = 1000


class Folded(StrEnum):
    """What recording one upstream end did. Only WAITING, DECIDED and CLOSED change the
    state: those the owner records as an event; the others write nothing."""

    WAITING = "waiting"        # its logical time waits for the other upstreams
    DECIDED = "decided"        # its logical time has its dependent run
    CLOSED = "closed"          # it did not meet the condition: no dependent run for that time
    DUPLICATE = "duplicate"    # recorded before
    LATE = "late"              # its logical time was settled before it came
    CONFLICTING = "conflicting"  # another run of the same upstream for the same time
    STRAY = "stray"            # not from an upstream of this job (an update removed it)


@dataclass(frozen=True)
class DependentRun:
    """A decision: the dependent run of one logical time — to run, or recorded missed."""

    slot: ChainSlot
    run_id: UUID
    upstream_run_ids: tuple[UUID, ...]
    depth: int
    missed_reason: str | None = None

    @property
    def logical_time(self) -> datetime:
        return self.slot.logical_time

    @property
    def runs(self) -> bool:
        return self.missed_reason is None


@dataclass(frozen=True)
class Fold:
    folded: Folded
    # Runs decided by this call: its own, and those of slots whose window passed before it.
    decisions: tuple[DependentRun, ...] = ()
    reason: str | None = None

    @property
    def recorded(self) -> bool:
        return self.folded in (Folded.WAITING, Folded.DECIDED, Folded.CLOSED)


@dataclass
class _Waiting:
    opened_at: datetime
    ends: dict[UUID, UpstreamEnd] = field(default_factory=dict)


class FanIn:
    """The waiting and settled logical times of one dependent job."""

    def __init__(self, job_id: UUID, dependency: Dependency,
                 max_waiting: int = MAX_WAITING_SLOTS,
                 max_settled: int = MAX_SETTLED_SLOTS) -> None:
        self.job_id = job_id
        self.dependency = dependency
        self._max_waiting = max(1, max_waiting)
        self._max_settled = max(1, max_settled)
        self._waiting: dict[ChainSlot, _Waiting] = {}
        # Settled slot -> (when, the upstream runs recorded for it); in the order settled.
        self._settled: dict[ChainSlot, tuple[datetime, frozenset[UUID]]] = {}

    def record(self, end: UpstreamEnd, now: datetime) -> Fold:
        """Folds one upstream end in; raises InvalidSpec (nothing changed) on a malformed one."""
        end = require_upstream_end(end)
        expired = self.expire(now)
        folded, decided, reason = self._fold(end, now)
        self._forget(now)
        return Fold(folded, expired + decided, reason)

    def expire(self, now: datetime) -> tuple[DependentRun, ...]:
        """Settles, oldest first, every logical time whose wait window has passed by `now`:
        its dependent run is recorded missed, naming the upstreams that never came."""
        window = self.dependency.wait_window
        due = sorted((w.opened_at, slot) for slot, w in self._waiting.items()
                     if w.opened_at + window <= now)
        decisions = tuple(self._miss(slot, now, self._window_reason(slot)) for _, slot in due)
        self._forget(now)
        return decisions

    def note_settled(self, slot: ChainSlot, upstream_run_ids: tuple[UUID, ...],
                     at: datetime) -> None:
        """Replays a decision read back from the log (the dependent run's RunScheduled or
        RunMissed): a new owner must not decide again what its predecessor wrote."""
        self._waiting.pop(slot, None)
        if slot not in self._settled:
            self._settle(slot, at, frozenset(upstream_run_ids))
        self._forget(at)

    def opened_at(self, slot: ChainSlot) -> datetime | None:
        """When the logical time began to wait, if it waits."""
        waiting = self._waiting.get(slot)
        return waiting.opened_at if waiting is not None else None

    def restore_waiting(self, end: UpstreamEnd, opened_at: datetime) -> None:
        """Loads an end recorded as waiting (JobUpstreamRecorded) back from the projection,
        with no decision: what it led to is already in the log."""
        if end.slot in self._settled or end.upstream_job_id not in self.dependency.job_ids:
            return
        waiting = self._waiting.setdefault(end.slot, _Waiting(opened_at=opened_at))
        waiting.opened_at = min(waiting.opened_at, opened_at)
        waiting.ends.setdefault(end.upstream_job_id, end)

    def next_deadline(self) -> datetime | None:
        """When the owner should call expire next."""
        if not self._waiting:
            return None
        return min(w.opened_at for w in self._waiting.values()) + self.dependency.wait_window

    def waiting(self) -> dict[ChainSlot, tuple[UUID, ...]]:
        """Each waiting logical time and the upstream jobs it still waits for."""
        return {slot: self._missing(slot) for slot in sorted(self._waiting)}

    def retarget(self, dependency: Dependency, now: datetime) -> tuple[DependentRun, ...]:
        """An UpdateJob changed `after`: ends of jobs no longer named are let go, and a
        waiting time that now has all its upstreams is decided at once."""
        self.dependency = dependency
        decisions = list(self.expire(now))
        for slot in sorted(self._waiting):
            waiting = self._waiting[slot]
            waiting.ends = {j: e for j, e in waiting.ends.items() if j in dependency.job_ids}
            if not waiting.ends:
                del self._waiting[slot]
            elif not self._missing(slot):
                decisions.append(self._decide(slot, now))
        return tuple(decisions)

    def _fold(self, end: UpstreamEnd, now: datetime
              ) -> tuple[Folded, tuple[DependentRun, ...], str | None]:
        upstream, slot = end.upstream_job_id, end.slot
        if upstream not in self.dependency.job_ids:
            return Folded.STRAY, (), None
        settled = self._settled.get(slot)
        if settled is not None:
            seen = end.upstream_run_id in settled[1]
            return (Folded.DUPLICATE if seen else Folded.LATE), (), None
        waiting = self._waiting.get(slot)
        if waiting is not None and upstream in waiting.ends:
            same = waiting.ends[upstream].upstream_run_id == end.upstream_run_id
            return (Folded.DUPLICATE if same else Folded.CONFLICTING), (), None
        condition = self.dependency.condition
        if not meets(condition, end.status):
            reason = (f"upstream job {upstream} run {end.upstream_run_id} ended {end.status}; "
                      f"this job runs on {condition.value}")
            came = {e.upstream_run_id for e in waiting.ends.values()} if waiting else set()
            self._waiting.pop(slot, None)
            self._settle(slot, now, frozenset(came | {end.upstream_run_id}))
            return Folded.CLOSED, (), reason
        evicted: tuple[DependentRun, ...] = ()
        if waiting is None:
            evicted = self._make_room(now)
            waiting = self._waiting[slot] = _Waiting(opened_at=now)
        waiting.ends[upstream] = end
        if self._missing(slot):
            return Folded.WAITING, evicted, None
        return Folded.DECIDED, (*evicted, self._decide(slot, now)), None

    def _decide(self, slot: ChainSlot, now: datetime) -> DependentRun:
        ends = self._waiting[slot].ends.values()
        depth = max(e.depth for e in ends) + 1
        if depth > MAX_CHAIN_DEPTH:
            return self._miss(slot, now, f"the chain is deeper than {MAX_CHAIN_DEPTH} runs: "
                                         "a dependency cycle?")
        run_ids = tuple(sorted(e.upstream_run_id for e in ends))
        del self._waiting[slot]
        self._settle(slot, now, frozenset(run_ids))
        return DependentRun(slot, dependent_run_id(self.job_id, run_ids), run_ids, depth)

    def _miss(self, slot: ChainSlot, now: datetime, reason: str) -> DependentRun:
        ends = self._waiting.pop(slot).ends.values()
        run_ids = tuple(sorted(e.upstream_run_id for e in ends))
        depth = min(MAX_CHAIN_DEPTH, max((e.depth for e in ends), default=0) + 1)
        self._settle(slot, now, frozenset(run_ids))
        return DependentRun(slot, dependent_run_id(self.job_id, run_ids), run_ids, depth,
                            missed_reason=reason)

    def _make_room(self, now: datetime) -> tuple[DependentRun, ...]:
        if len(self._waiting) < self._max_waiting:
            return ()
        _, oldest = min((w.opened_at, slot) for slot, w in self._waiting.items())
        return (self._miss(oldest, now, f"more than {self._max_waiting} logical times were "
                                        "waiting for their upstreams; the oldest gave way"),)

    def _missing(self, slot: ChainSlot) -> tuple[UUID, ...]:
        ends = self._waiting[slot].ends
        return tuple(j for j in self.dependency.job_ids if j not in ends)

    def _window_reason(self, slot: ChainSlot) -> str:
        missing = ", ".join(map(str, self._missing(slot)))
        window = self.dependency.wait_window.total_seconds()
        return f"upstream job(s) {missing} did not end within the wait window of {window:.0f}s"

    def _settle(self, slot: ChainSlot, now: datetime, run_ids: frozenset[UUID]) -> None:
        self._settled[slot] = (now, run_ids)

    def _forget(self, now: datetime) -> None:
        horizon = now - self.dependency.wait_window
        while self._settled:
            slot, (settled_at, _) = next(iter(self._settled.items()))
            if settled_at > horizon and len(self._settled) <= self._max_settled:
                break
            del self._settled[slot]
