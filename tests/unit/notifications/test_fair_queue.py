"""The notifier's pending deliveries (notifications/fair_queue.py): round-robin across
tenants, one in flight per channel, K per tenant, due order within a channel, bounded
sizes; a tenant's dead endpoint never delays another tenant; with a property test of the
rules over random sequences of adds, takes, retries and completions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.notifications.fair_queue import FairQueue, QueueFull, TenantQueueFull
from cronlog.notifications.model import Delivery
from tests.support.examples import examples
from tests.support.notifications import T0, delivery

S = timedelta(seconds=1)


def queue(total: int = 100, per_tenant: int = 50, k: int = 4) -> FairQueue:
    return FairQueue(max_total=total, max_per_tenant=per_tenant, max_in_flight_per_tenant=k)


def tenants_of(taken: list[Delivery]) -> list[str]:
    return [d.tenant for d in taken]


def test_a_channel_sends_one_delivery_at_a_time_in_due_order() -> None:
    q = queue()
    later, first, second = delivery(n=1, due_at=T0 + S), delivery(n=2), delivery(n=3)
    for d in (later, first, second):
        assert q.add(d)
    taken = q.take(T0 + 2 * S, 10)
    assert [d.delivery_id for d in taken] == [first.delivery_id]
    assert q.take(T0 + 2 * S, 10) == [], "its channel is busy"
    q.done(taken[0])
    assert [d.delivery_id for d in q.take(T0 + 2 * S, 10)] == [second.delivery_id]


def test_nothing_is_taken_before_it_is_due() -> None:
    q = queue()
    q.add(delivery(due_at=T0 + 5 * S))
    assert q.take(T0, 10) == []
    assert q.next_due() == T0 + 5 * S
    assert len(q.take(T0 + 5 * S, 10)) == 1
    assert q.next_due() is None


def test_a_tenant_has_at_most_k_in_flight_across_its_channels() -> None:
    q = queue(k=2)
    for n in range(5):
        q.add(delivery("acme", n, to=n))
    taken = q.take(T0, 10)
    assert len(taken) == 2 and len({d.channel_id for d in taken}) == 2
    assert q.in_flight("acme") == 2 and q.held("acme") == 5
    assert q.next_due() is None, "nothing acme may take until one is done"
    q.done(taken[0])
    assert len(q.take(T0, 10)) == 1


def test_tenants_take_turns_one_delivery_each() -> None:
    q = queue(k=10)
    for n in range(6):
        q.add(delivery("acme", n, to=n))
        q.add(delivery("bravo", n, to=n))
    q.add(delivery("corp", 0))
    assert tenants_of(q.take(T0, 7)) == ["acme", "bravo", "corp", "acme", "bravo", "acme",
                                         "bravo"]


def test_the_tenants_served_go_behind_the_others_for_the_next_take() -> None:
    q = queue(k=10)
    for name in ("acme", "bravo", "corp"):
        for n in range(3):
            q.add(delivery(name, n, to=n))
    order = [tenants_of(q.take(T0, 1))[0] for _ in range(6)]
    assert order == ["acme", "bravo", "corp", "acme", "bravo", "corp"]


def test_a_retry_keeps_its_id_and_first_attempt_and_frees_its_channel_meanwhile() -> None:
    q = queue()
    q.add(delivery(n=1))
    q.add(delivery(n=2))
    (first,) = q.take(T0 + S, 10)
    assert (first.attempt, first.first_at) == (1, T0 + S)
    again = q.retry_at(first, T0 + 60 * S)
    assert (again.delivery_id, again.attempt, again.first_at, again.due_at) == (
        first.delivery_id, 2, T0 + S, T0 + 60 * S)
    (second,) = q.take(T0 + 2 * S, 10)
    assert second.alert.alert_id != first.alert.alert_id, "the next one went meanwhile"
    q.done(second)
    assert q.take(T0 + 59 * S, 10) == []
    (retried,) = q.take(T0 + 60 * S, 10)
    assert (retried.delivery_id, retried.attempt, retried.first_at) == (
        first.delivery_id, 2, T0 + S)
    q.done(retried)
    assert len(q) == 0 and q.tenants == 0


def test_a_tenants_dead_endpoint_does_not_delay_another_tenant() -> None:
    q = queue(total=1_000, per_tenant=600, k=4)
    for n in range(500):  # acme's one channel never answers
        q.add(delivery("acme", n, to="dead"))
    now = T0
    for n in range(20):
        q.add(delivery("bravo", n, to="ok", due_at=now))
        taken = q.take(now, 2)
        assert "bravo" in tenants_of(taken), f"bravo's delivery {n} waited"
        for d in taken:
            if d.tenant == "acme":
                q.retry_at(d, now + 30 * S)  # a timeout later, it failed
            else:
                q.done(d)
        now += S


def test_the_total_and_each_tenants_size_are_bounded_with_their_own_errors() -> None:
    q = queue(total=5, per_tenant=3, k=1)
    for n in range(3):
        q.add(delivery("acme", n))
    with pytest.raises(TenantQueueFull, match="tenant 'acme' holds 3 deliveries"):
        q.add(delivery("acme", 3))
    q.add(delivery("bravo", 0))
    q.add(delivery("bravo", 1))
    with pytest.raises(QueueFull, match="the notifier holds 5 deliveries") as full:
        q.add(delivery("corp", 0))
    assert not isinstance(full.value, TenantQueueFull)
    assert issubclass(TenantQueueFull, QueueFull)
    (taken,) = [d for d in q.take(T0, 10) if d.tenant == "acme"]
    with pytest.raises(TenantQueueFull):  # the one in flight still counts
        q.add(delivery("acme", 3))
    q.done(taken)
    assert q.add(delivery("acme", 3))


def test_a_delivery_already_held_is_not_added_twice() -> None:
    q = queue()
    assert q.add(delivery(n=1))
    assert not q.add(delivery(n=1))
    assert len(q.take(T0, 10)) == 1
    assert not q.add(delivery(n=1)), "in flight is held too"
    assert len(q) == 1


def test_only_a_delivery_in_flight_can_be_done_or_retried() -> None:
    q = queue()
    d = delivery()
    q.add(d)
    with pytest.raises(ValueError, match="is not in flight"):
        q.done(d)
    with pytest.raises(ValueError, match="is not in flight"):
        q.retry_at(d, T0)
    (taken,) = q.take(T0, 1)
    q.done(taken)
    with pytest.raises(ValueError, match="is not in flight"):
        q.done(taken)


@pytest.mark.parametrize(("total", "per_tenant", "k"), [(0, 0, 1), (5, 6, 1), (5, 0, 1), (5, 5, 0)])
def test_bounds_that_make_no_sense_are_refused(total: int, per_tenant: int, k: int) -> None:
    with pytest.raises(ValueError):
        FairQueue(total, per_tenant, k)


# The rules over random runs, against a model of what the queue holds.

@dataclass(frozen=True)
class Add:
    tenant: str
    to: int
    due: int


@dataclass(frozen=True)
class Take:
    limit: int


@dataclass(frozen=True)
class Finish:
    pick: int
    retry_in: int | None


TENANTS = ("acme", "bravo", "corp")
# Few channels and mostly due at once: deliveries meet on a channel and in a take often.
ops = st.lists(st.one_of(
    st.builds(Add, st.sampled_from(TENANTS), st.integers(0, 2), st.sampled_from((0, 0, 1, 4))),
    st.builds(Take, st.integers(0, 6)),
    st.builds(Finish, st.integers(0, 100), st.none() | st.sampled_from((0, 1, 3))),
    st.just("tick")), max_size=80)


@settings(max_examples=examples(150), deadline=None)
@given(ops, st.integers(1, 3))
def test_every_take_keeps_the_rules(steps: list[object], k: int) -> None:
    q = queue(total=12, per_tenant=6, k=k)
    now = T0
    pending: dict[object, Delivery] = {}
    flying: dict[object, Delivery] = {}
    made = Counter[str]()
    for step in steps:
        if step == "tick":
            now += S
        elif isinstance(step, Add):
            d = delivery(step.tenant, made[step.tenant], to=step.to, due_at=now + step.due * S)
            made[step.tenant] += 1
            held = Counter(x.tenant for x in (*pending.values(), *flying.values()))
            if held[step.tenant] >= 6:
                with pytest.raises(TenantQueueFull):
                    q.add(d)
            elif sum(held.values()) >= 12:
                with pytest.raises(QueueFull):
                    q.add(d)
            else:
                assert q.add(d)
                pending[d.delivery_id] = d
        elif isinstance(step, Finish):
            if not flying:
                continue
            d = list(flying.values())[step.pick % len(flying)]
            del flying[d.delivery_id]
            if step.retry_in is None:
                q.done(d)
            else:
                again = q.retry_at(d, now + step.retry_in * S)
                assert (again.attempt, again.first_at) == (d.attempt + 1, d.first_at)
                pending[d.delivery_id] = again
        else:
            assert isinstance(step, Take)
            taken = q.take(now, step.limit)
            assert len(taken) <= step.limit
            for d in taken:
                was = pending.pop(d.delivery_id)
                assert was.due_at <= now and d.first_at is not None
                same_channel = [p for p in pending.values() if p.channel_id == d.channel_id]
                assert all(was.due_at <= p.due_at for p in same_channel), "due order"
                flying[d.delivery_id] = d
            check_in_flight(flying, k)
            takeable = takeable_tenants(pending, flying, now, k)
            if len(taken) < step.limit:
                assert takeable == set(), "a due delivery was left that could go"
            counts = Counter(tenants_of(taken))
            for tenant in takeable:
                assert counts[tenant] >= max(counts.values(), default=0) - 1, "turns"
        assert len(q) == len(pending) + len(flying)
        assert q.tenants == len({d.tenant for d in (*pending.values(), *flying.values())})


def check_in_flight(flying: dict[object, Delivery], k: int) -> None:
    assert max(Counter(d.channel_id for d in flying.values()).values(), default=0) <= 1
    assert max(Counter(d.tenant for d in flying.values()).values(), default=0) <= k


def takeable_tenants(pending: dict[object, Delivery], flying: dict[object, Delivery],
                     now: datetime, k: int) -> set[str]:
    busy = {d.channel_id for d in flying.values()}
    per_tenant = Counter(d.tenant for d in flying.values())
    return {d.tenant for d in pending.values()
            if d.due_at <= now and d.channel_id not in busy and per_tenant[d.tenant] < k}
