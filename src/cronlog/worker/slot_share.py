"""Which held dispatch a worker starts in its next free slot: each tenant gets its share.

The policy, in full:

- **Due order within a tenant.** A tenant's due attempts start in order of their due time
  (`not_before`), then of their arrival.
- **Round-robin among tenants.** The tenants with due attempts take turns, one start per
  turn: deficit round-robin with a quantum of one start and a cost of one per start. A
  tenant whose turn comes while it may not start is passed over and keeps its place behind
  the others.
- **A cap while others are present.** A tenant holds at most `cap` slots
  (`max(1, floor(share * slots))`, CRONLOG_WORKER_TENANT_SHARE, a half by default) while
  another tenant is *present* at this worker: it has a dispatch held here (due or not yet),
  has an attempt running here, or started one here within the last `linger`. Slots are not
  taken back from running handlers: a tenant above its cap (it was alone when it started
  them) starts nothing more until it is below the cap again.
- **A tenant alone takes every slot.** With no other tenant present, the cap does not apply.
- **Work-conserving.** A slot is left idle only while every tenant with a due attempt is at
  its cap with another tenant present.

Presence reaches ahead and lingers so that a tenant whose runs are seconds or a minute apart
is protected between them: its dispatches reach the worker up to the lookahead before their
time (8 s for dense jobs, 60 s for sparse ones) and it stays present `linger` (60 s) after
its last start. Without that, a tenant with hour-long runs would fill every slot in the
gaps between another tenant's runs, and the other tenant would wait for an hour.

Bounds (what the property tests in tests/unit/worker/test_slot_share.py check):

- **Share.** No start takes a tenant to more than `cap` running while another tenant is
  present.
- **No starvation.** With R tenants holding due attempts, a tenant that may start is given
  one of the next R starts; its k-th due attempt (in due order) starts within k * R starts
  of this worker, counting only starts made while that tenant may start. A tenant may not
  start only while it holds `cap` slots itself, so it always has slots that free up.
- **Cost.** Choosing a start passes over at most `slots // cap` capped tenants (each of them
  holds at least `cap` slots): O(slots / cap) ring steps plus two heap operations,
  O(log held); dropping (a cancel, a revoke) is one pass over what is held.

Pure: no clock, no threads, no I/O. The worker calls it from its loop thread only.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_SHARE = 0.5
# A tenant that started an attempt at a worker within this long is still present there.
LINGER = timedelta(seconds=60)


def slot_cap(slots: int, share: float) -> int:
    """The slots one tenant may hold while another is present: at least one."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"a tenant's share must be in (0, 1], got {share!r}")
    return max(1, math.floor(share * slots + 1e-9))


class SlotShare(Generic[T]):
    """The held dispatches of one worker loop, and which of them to start next.

    `hold` every dispatch as it arrives, `next_start` when a slot is free, `finished` when a
    handler returns its slot, `drop` for dispatches cancelled or revoked before they start.
    """

    def __init__(self, slots: int, share: float = DEFAULT_SHARE,
                 linger: timedelta = LINGER) -> None:
        self.slots = slots
        self.share = share
        self.cap = slot_cap(slots, share)
        self._linger = linger
        self._seq = 0
        # Not yet due: (due, seq, tenant, item), earliest first.
        self._future: list[tuple[datetime, int, str, T]] = []
        # Due and not started, by tenant: (due, seq, item), earliest first.
        self._due: dict[str, list[tuple[datetime, int, T]]] = {}
        # The tenants of _due, in the order their turns come.
        self._ring: deque[str] = deque()
        # Positive counts only (a tenant at zero is removed): presence is a look at the keys.
        self._held: Counter[str] = Counter()
        self._held_total = 0
        self._running: Counter[str] = Counter()
        # Last start per tenant, oldest first; entries older than the linger are pruned.
        self._recent: OrderedDict[str, datetime] = OrderedDict()

    # What is held.

    def hold(self, tenant: str, due: datetime, item: T) -> None:
        self._seq += 1
        heapq.heappush(self._future, (due, self._seq, tenant, item))
        self._held[tenant] += 1
        self._held_total += 1

    def drop(self, unwanted: Callable[[T], bool]) -> list[T]:
        """Removes the held dispatches `unwanted` picks (one pass over what is held)."""
        dropped: list[T] = []
        kept = [entry for entry in self._future if not unwanted(entry[3])]
        if len(kept) != len(self._future):
            for entry in self._future:
                if unwanted(entry[3]):
                    dropped.append(entry[3])
                    self._release_held(entry[2])
            heapq.heapify(kept)
            self._future = kept
        for tenant in list(self._due):
            queue = self._due[tenant]
            remaining = [waiting for waiting in queue if not unwanted(waiting[2])]
            if len(remaining) == len(queue):
                continue
            for waiting in queue:
                if unwanted(waiting[2]):
                    dropped.append(waiting[2])
                    self._release_held(tenant)
            if remaining:
                heapq.heapify(remaining)
                self._due[tenant] = remaining
            else:
                del self._due[tenant]
                self._ring.remove(tenant)
        return dropped

    @property
    def held(self) -> int:
        return self._held_total

    def held_by_tenant(self) -> dict[str, int]:
        return dict(self._held)

    def running_by_tenant(self) -> dict[str, int]:
        """A copy, made by one C-level dict copy: safe to call from another thread."""
        return dict(self._running)

    def next_due(self) -> datetime | None:
        """When the earliest dispatch not yet due becomes due."""
        return self._future[0][0] if self._future else None

    def waiting(self, now: datetime) -> bool:
        """Some attempt is due and not started (whether or not its tenant may start)."""
        self._promote(now)
        return bool(self._ring)

    def startable(self, now: datetime) -> bool:
        """Some due attempt may start now, given a free slot."""
        self._promote(now)
        if not self._ring:
            return False
        self._prune(now)
        return any(self._may_start(tenant) for tenant in self._ring)

    # Starting and finishing.

    def next_start(self, now: datetime) -> tuple[str, datetime, T] | None:
        """The attempt to start in a free slot now, counted as running: (tenant, due, item);
        None when no due attempt may start."""
        self._promote(now)
        self._prune(now)
        ring = self._ring
        for _ in range(len(ring)):
            tenant = ring[0]
            if not self._may_start(tenant):
                ring.rotate(-1)
                continue
            queue = self._due[tenant]
            due, _, item = heapq.heappop(queue)
            if queue:
                ring.rotate(-1)
            else:
                ring.popleft()
                del self._due[tenant]
            self._release_held(tenant)
            self._running[tenant] += 1
            self._recent[tenant] = now
            self._recent.move_to_end(tenant)
            return tenant, due, item
        return None

    def finished(self, tenant: str) -> None:
        """One of the tenant's attempts gave its slot back."""
        if tenant not in self._running:
            return
        left = self._running[tenant] - 1
        if left > 0:
            self._running[tenant] = left
        else:
            del self._running[tenant]

    # The rules.

    def _may_start(self, tenant: str) -> bool:
        return self._running[tenant] < self.cap or self._alone(tenant)

    def _alone(self, tenant: str) -> bool:
        """No other tenant holds a dispatch here, runs here, or started here lately."""
        for present in (self._held, self._running, self._recent):
            if len(present) > 1 or (present and tenant not in present):
                return False
        return True

    def _promote(self, now: datetime) -> None:
        future = self._future
        while future and future[0][0] <= now:
            due, seq, tenant, item = heapq.heappop(future)
            queue = self._due.get(tenant)
            if queue is None:
                queue = self._due[tenant] = []
                self._ring.append(tenant)
            heapq.heappush(queue, (due, seq, item))

    def _prune(self, now: datetime) -> None:
        recent = self._recent
        while recent:
            tenant, at = next(iter(recent.items()))
            if now - at <= self._linger:
                return
            del recent[tenant]

    def _release_held(self, tenant: str) -> None:
        self._held_total -= 1
        left = self._held[tenant] - 1
        if left > 0:
            self._held[tenant] = left
        else:
            del self._held[tenant]
