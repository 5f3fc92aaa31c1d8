"""The notifier's pending deliveries, and which of them to send next: fair across tenants.

The policy, in full:

- **Due order within a channel.** A channel's deliveries are sent in order of their due
  time, then of their arrival: a new alert is due when it arrives, a retry when its plan
  says (retry_plan.py).
- **One in flight per channel.** A channel has at most one delivery being sent: a slow or
  dead endpoint holds one sender, never more. A delivery waiting for its retry is not in
  flight; the channel's next delivery may go meanwhile (each has its own retries).
- **At most K in flight per tenant** (`max_in_flight_per_tenant`): however many channels a
  tenant has, the senders it holds are bounded.
- **Round-robin among tenants.** take() hands out one delivery per tenant per turn, among
  the tenants with a due delivery they may send; within a tenant, its channel whose next
  delivery is due earliest. Tenants served in one call go behind the others for the next,
  so with a small `limit` no tenant is served twice before every other ready tenant once.
- **Bounded.** At most `max_total` deliveries held (pending and in flight) and at most
  `max_per_tenant` of one tenant: add() beyond raises QueueFull, or TenantQueueFull (a
  QueueFull); the caller answers it (records the delivery as failed, says so), nothing
  waits on it.

So one tenant's slow or failing endpoint never delays another tenant's deliveries: it
holds at most one of that tenant's K senders, and every other tenant keeps its turn.

Cost (invariant 12): take() is one pass over the tenants plus `limit` turns of O(log n)
each; add(), done() and retry_at() are O(log n), n the deliveries of one channel or the
channels of one tenant; next_due() is one pass over the tenants. Tenants are at most
`max_total` (a tenant is forgotten with its last delivery).

Pure: no clock (`now` is passed in), no threads, no I/O.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from datetime import datetime
from uuid import UUID

from sortedcontainers import SortedList

from cronlog.notifications.model import Delivery


class QueueFull(Exception):
    """The notifier holds `max_total` deliveries already: this one is refused."""

    def __init__(self, delivery: Delivery, bound: int, scope: str = "the notifier") -> None:
        super().__init__(f"{scope} holds {bound} deliveries already (its bound): delivery "
                         f"{delivery.delivery_id} of alert {delivery.alert.alert_id} refused")
        self.delivery = delivery
        self.bound = bound


class TenantQueueFull(QueueFull):
    """The delivery's tenant holds `max_per_tenant` deliveries already: this one is
    refused; other tenants' are not."""

    def __init__(self, delivery: Delivery, bound: int) -> None:
        super().__init__(delivery, bound, f"tenant {delivery.tenant!r}")


@dataclass
class _Channel:
    # (due, seq, delivery), earliest first.
    pending: list[tuple[datetime, int, Delivery]] = field(default_factory=list)
    busy: bool = False

    def head(self) -> tuple[datetime, int]:
        due, seq, _ = self.pending[0]
        return due, seq


@dataclass
class _Tenant:
    channels: dict[UUID, _Channel] = field(default_factory=dict)
    # One (due, seq, channel id) per channel that is idle and has a pending delivery: its
    # earliest one's key.
    ready: SortedList = field(default_factory=SortedList)
    held: int = 0
    in_flight: int = 0


class FairQueue:
    """Pending deliveries by tenant and channel. `add` each new delivery, `take` when senders
    are free, then `done` (delivered, or given up) or `retry_at` for each one taken."""

    def __init__(self, max_total: int, max_per_tenant: int, max_in_flight_per_tenant: int) -> None:
        if not 1 <= max_per_tenant <= max_total:
            raise ValueError(f"queue bounds: need 1 <= max_per_tenant ({max_per_tenant}) <= "
                             f"max_total ({max_total})")
        if max_in_flight_per_tenant < 1:
            raise ValueError(f"max_in_flight_per_tenant: 1 or more, not {max_in_flight_per_tenant}")
        self.max_total = max_total
        self.max_per_tenant = max_per_tenant
        self.max_in_flight_per_tenant = max_in_flight_per_tenant
        # Insertion order is turn order: a tenant served goes to the end.
        self._tenants: OrderedDict[str, _Tenant] = OrderedDict()
        self._held: set[UUID] = set()
        self._in_flight: dict[UUID, Delivery] = {}
        self._seq = 0

    # What is held.

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, delivery_id: object) -> bool:
        return delivery_id in self._held

    @property
    def tenants(self) -> int:
        """The tenants with a delivery held: a tenant is forgotten with its last one."""
        return len(self._tenants)

    def held(self, tenant: str) -> int:
        """The tenant's deliveries, pending and in flight."""
        found = self._tenants.get(tenant)
        return found.held if found else 0

    def in_flight(self, tenant: str) -> int:
        found = self._tenants.get(tenant)
        return found.in_flight if found else 0

    def next_due(self) -> datetime | None:
        """The earliest due time of a delivery that could be taken once due (its channel is
        idle, its tenant below K in flight); None when there is none. One pass over the
        tenants."""
        times = [t.ready[0][0] for t in self._tenants.values()
                 if t.ready and t.in_flight < self.max_in_flight_per_tenant]
        return min(times, default=None)

    # Adding and taking.

    def add(self, delivery: Delivery) -> bool:
        """Holds the delivery until it is taken; False when one with its id is held already
        (an alert read twice). Raises TenantQueueFull or QueueFull beyond the bounds."""
        if delivery.delivery_id in self._held:
            return False
        tenant = self._tenants.get(delivery.tenant)
        if tenant is not None and tenant.held >= self.max_per_tenant:
            raise TenantQueueFull(delivery, self.max_per_tenant)
        if len(self._held) >= self.max_total:
            raise QueueFull(delivery, self.max_total)
        if tenant is None:
            tenant = self._tenants[delivery.tenant] = _Tenant()
        tenant.held += 1
        self._held.add(delivery.delivery_id)
        self._push(tenant, delivery)
        return True

    def take(self, now: datetime, limit: int) -> list[Delivery]:
        """Up to `limit` due deliveries, round-robin across tenants, each counted in flight
        until done() or retry_at(). Attempt 1 is given its `first_at` (now).

        Cost: one pass over the tenants to find the ready ones, then at most `limit` turns,
        each O(log n): O(tenants + limit * log n)."""
        taken: list[Delivery] = []
        if limit < 1:
            return taken
        turns = deque(name for name, tenant in self._tenants.items()
                      if self._may_take(tenant, now))
        served: list[str] = []
        while turns and len(taken) < limit:  # at most `limit` turns: each one takes
            name = turns.popleft()
            tenant = self._tenants[name]
            _, _, channel_id = tenant.ready.pop(0)
            channel = tenant.channels[channel_id]
            _, _, delivery = heapq.heappop(channel.pending)
            channel.busy = True
            tenant.in_flight += 1
            if delivery.first_at is None:
                delivery = replace(delivery, first_at=now)
            self._in_flight[delivery.delivery_id] = delivery
            taken.append(delivery)
            served.append(name)
            if self._may_take(tenant, now):
                turns.append(name)
        for name in served:  # at most `limit`
            self._tenants.move_to_end(name)
        return taken

    def done(self, delivery: Delivery) -> None:
        """A delivery taken is finished: delivered, or given up (its own dead letter)."""
        taken = self._release(delivery)
        tenant = self._tenants[taken.tenant]
        tenant.held -= 1
        self._held.discard(taken.delivery_id)
        channel = tenant.channels[taken.channel_id]
        if not channel.pending:
            del tenant.channels[taken.channel_id]
            if tenant.held == 0:
                del self._tenants[taken.tenant]

    def retry_at(self, delivery: Delivery, when: datetime) -> Delivery:
        """A delivery taken failed and is tried again at `when`, as its next attempt (the
        same id, the same first_at): the delivery held now, which is returned."""
        taken = self._release(delivery)
        again = replace(taken, attempt=taken.attempt + 1, due_at=when)
        self._push(self._tenants[taken.tenant], again)
        return again

    # The rules.

    def _may_take(self, tenant: _Tenant, now: datetime) -> bool:
        return (tenant.in_flight < self.max_in_flight_per_tenant and bool(tenant.ready)
                and tenant.ready[0][0] <= now)

    def _push(self, tenant: _Tenant, delivery: Delivery) -> None:
        """Adds a pending delivery to its channel, keeping the tenant's ready entry of an idle
        channel on the channel's earliest delivery. O(log n)."""
        channel = tenant.channels.get(delivery.channel_id)
        if channel is None:
            channel = tenant.channels[delivery.channel_id] = _Channel()
        before = channel.head() if channel.pending else None
        self._seq += 1
        heapq.heappush(channel.pending, (delivery.due_at, self._seq, delivery))
        after = channel.head()
        if channel.busy or after == before:
            return
        if before is not None:
            tenant.ready.remove((*before, delivery.channel_id))
        tenant.ready.add((*after, delivery.channel_id))

    def _release(self, delivery: Delivery) -> Delivery:
        """The delivery is no longer in flight: its channel is idle again, ready if it has a
        pending delivery."""
        taken = self._in_flight.pop(delivery.delivery_id, None)
        if taken is None:
            raise ValueError(f"delivery {delivery.delivery_id} is not in flight: take() it "
                             "before done() or retry_at()")
        tenant = self._tenants[taken.tenant]
        tenant.in_flight -= 1
        channel = tenant.channels[taken.channel_id]
        channel.busy = False
        if channel.pending:
            tenant.ready.add((*channel.head(), taken.channel_id))
        return taken
