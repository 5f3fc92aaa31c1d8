"""The worker's slot share (worker/slot_share.py): round-robin among tenants with due
attempts, due order within a tenant, a cap while another tenant is present, every slot to a
tenant alone; with property tests of its bounds against a model of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cronlog.worker.slot_share import SlotShare, slot_cap
from tests.support.examples import examples

T0 = datetime(2026, 3, 1, tzinfo=UTC)
S = timedelta(seconds=1)


def fill(share: SlotShare[str], now: datetime, free: int) -> list[str]:
    started: list[str] = []
    while free and (chosen := share.next_start(now)) is not None:
        started.append(chosen[2])
        free -= 1
    return started


def test_the_cap_is_the_share_of_the_slots_rounded_down_and_at_least_one() -> None:
    assert slot_cap(16, 0.5) == 8
    assert slot_cap(16, 1.0) == 16
    assert slot_cap(10, 0.3) == 3
    assert slot_cap(3, 0.1) == 1
    assert slot_cap(1, 0.5) == 1
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="share"):
            slot_cap(16, bad)


def test_a_tenant_alone_takes_every_slot_in_due_order() -> None:
    share: SlotShare[str] = SlotShare(4, 0.5)
    for n in (3, 1, 2, 5, 4):
        share.hold("a", T0 + n * S, f"a{n}")
    assert fill(share, T0 + 10 * S, 4) == ["a1", "a2", "a3", "a4"]
    assert share.running_by_tenant() == {"a": 4} and share.held == 1


def test_one_tenants_backlog_takes_at_most_its_share_while_another_waits() -> None:
    share: SlotShare[str] = SlotShare(16, 0.5)
    for n in range(40):
        share.hold("hog", T0, f"hog{n}")
    share.hold("canary", T0 + 5 * S, "canary0")  # not due yet: present all the same
    started = fill(share, T0, 16)
    assert len(started) == 8, "the hog is capped while the canary's dispatch is held"
    assert share.startable(T0) is False and share.waiting(T0)
    assert fill(share, T0 + 5 * S, 8) == ["canary0"], "the canary starts at once, in a free slot"


def test_tenants_take_turns_one_start_each() -> None:
    share: SlotShare[str] = SlotShare(6, 1.0)
    for tenant in "abc":
        for n in range(4):
            share.hold(tenant, T0 + n * S, f"{tenant}{n}")
    assert fill(share, T0 + 10 * S, 6) == ["a0", "b0", "c0", "a1", "b1", "c1"]


def test_a_tenant_above_its_cap_starts_nothing_until_below_it() -> None:
    share: SlotShare[str] = SlotShare(4, 0.5)
    for n in range(8):
        share.hold("a", T0, f"a{n}")
    assert len(fill(share, T0, 4)) == 4, "alone: every slot"
    share.hold("b", T0, "b0")
    share.finished("a")
    assert fill(share, T0, 1) == ["b0"]
    share.finished("a")
    share.finished("a")
    assert fill(share, T0, 2) == ["a4"], "a holds 2 (its cap) again; b is still present"


def test_a_tenant_that_started_lately_is_present_until_the_linger_is_over() -> None:
    share: SlotShare[str] = SlotShare(4, 0.5, linger=60 * S)
    share.hold("b", T0, "b0")
    assert fill(share, T0, 4) == ["b0"]
    share.finished("b")
    for n in range(8):
        share.hold("a", T0, f"a{n}")
    assert len(fill(share, T0 + 60 * S, 4)) == 2, "b ran a minute ago: still present"
    assert len(fill(share, T0 + 61 * S, 2)) == 2, "b gone: a alone takes the rest"


def test_dropped_dispatches_leave_the_count_and_the_turns() -> None:
    share: SlotShare[str] = SlotShare(2, 0.5)
    for tenant, n in (("a", 0), ("a", 1), ("b", 0), ("c", 0)):
        share.hold(tenant, T0 if tenant != "c" else T0 + 9 * S, f"{tenant}{n}")
    assert share.waiting(T0)
    assert sorted(share.drop(lambda item: item.startswith(("b", "c")))) == ["b0", "c0"]
    assert share.held == 2 and share.held_by_tenant() == {"a": 2}
    assert fill(share, T0, 2) == ["a0", "a1"], "a is alone again"
    assert share.drop(lambda item: True) == [] and share.next_due() is None


# The model the properties are checked against.

@dataclass
class Model:
    slots: int
    cap: int
    linger: timedelta
    now: datetime = T0
    held: dict[int, tuple[str, datetime]] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)
    last_start: dict[str, datetime] = field(default_factory=dict)
    # Starts of others while a tenant had a due attempt and was allowed, since its last
    # start or the last time it was not allowed; and the bound for that run of starts.
    passed: dict[str, int] = field(default_factory=dict)
    bound: dict[str, int] = field(default_factory=dict)

    def present(self) -> set[str]:
        recent = {t for t, at in self.last_start.items() if self.now - at <= self.linger}
        return {t for t, _ in self.held.values()} | set(self.running) | recent

    def due_tenants(self) -> set[str]:
        return {t for t, due in self.held.values() if due <= self.now}

    def allowed(self, tenant: str) -> bool:
        return self.running.count(tenant) < self.cap or self.present() <= {tenant}


TENANTS = "abc"
# Due now mostly; later, or already past (a dispatch that reached the worker late).
_hold = st.tuples(st.just("hold"), st.sampled_from(TENANTS),
                  st.sampled_from([0, 0, 0, 1, 3, -1, -3]), st.integers(1, 4))
_finish = st.tuples(st.just("finish"), st.integers(0, 100))
_fill = st.tuples(st.just("fill"), st.integers(1, 8))
# Holds, fills and finishes most of the time; now and then time passes or a tenant's
# dispatches are dropped (a revoke, a cancel).
ops = st.one_of(_hold, _hold, _hold, _fill, _fill, _finish, _finish,
                st.tuples(st.just("tick"), st.integers(0, 4)),
                st.tuples(st.just("drop"), st.sampled_from(TENANTS)))


@settings(max_examples=examples(500), deadline=None)
# Turns: b waits behind a's backlog at most once.
@example(slots=4, share_of=1.0, steps=[("hold", "a", 0, 3), ("hold", "b", 0, 1), ("fill", 4)])
# The cap: a above it (alone when it started) while b's dispatch is held, not yet due.
@example(slots=2, share_of=0.5, steps=[("hold", "a", 0, 3), ("fill", 2), ("hold", "b", 3, 1),
                                       ("finish", 0), ("fill", 2)])
# A capped tenant's turn passes to the next one.
@example(slots=2, share_of=0.5, steps=[("hold", "a", 0, 2), ("hold", "b", 3, 1), ("fill", 2),
                                       ("tick", 3), ("fill", 2)])
# The linger: b ran a moment ago; then b ran more than the linger ago.
@example(slots=4, share_of=0.5, steps=[("hold", "b", 0, 1), ("fill", 1), ("finish", 0),
                                       ("hold", "a", 0, 4), ("fill", 4)])
@example(slots=4, share_of=0.5, steps=[("hold", "b", 0, 1), ("fill", 1), ("finish", 0),
                                       ("tick", 3), ("tick", 3), ("hold", "a", 0, 4),
                                       ("fill", 4)])
# Due order: an earlier attempt that arrives late goes first.
@example(slots=1, share_of=1.0, steps=[("hold", "a", 2, 1), ("tick", 2), ("hold", "a", -1, 1),
                                       ("fill", 1)])
@given(slots=st.integers(1, 8), share_of=st.sampled_from([0.2, 0.34, 0.5, 0.75, 1.0]),
       steps=st.lists(ops, max_size=100))
def test_share_work_conservation_due_order_and_no_starvation(
        slots: int, share_of: float, steps: list[tuple[object, ...]]) -> None:
    linger = 5 * S
    share: SlotShare[int] = SlotShare(slots, share_of, linger=linger)
    model = Model(slots, slot_cap(slots, share_of), linger)
    seq = 0
    for op in steps:
        if op[0] == "hold":
            tenant, ahead = str(op[1]), int(str(op[2]))
            for _ in range(int(str(op[3]))):
                seq += 1
                model.held[seq] = (tenant, model.now + ahead * S)
                share.hold(tenant, model.now + ahead * S, seq)
        elif op[0] == "tick":
            model.now += int(str(op[1])) * S
        elif op[0] == "finish" and model.running:
            tenant = model.running.pop(int(str(op[1])) % len(model.running))
            share.finished(tenant)
        elif op[0] == "drop":
            gone = {n for n, (t, _) in model.held.items() if t == op[1]}
            assert set(share.drop(gone.__contains__)) == gone
            for n in gone:
                del model.held[n]
        elif op[0] == "fill":
            for _ in range(int(str(op[1]))):
                if len(model.running) == slots:
                    break
                chosen = share.next_start(model.now)
                due_tenants = model.due_tenants()
                if chosen is None:
                    # Work-conserving: nobody due may start.
                    assert not any(model.allowed(t) for t in due_tenants), \
                        "a slot left idle while an allowed attempt was due"
                    break
                tenant, due, n = chosen
                assert model.held.pop(n) == (tenant, due)
                assert due <= model.now, "started before its time"
                # Due order within the tenant.
                assert all(d >= due for t, d in model.held.values()
                           if t == tenant and d <= model.now)
                # The share: over the cap only when nobody else is present.
                if model.running.count(tenant) >= model.cap:
                    assert model.present() <= {tenant}, \
                        "over the cap while another tenant was present"
                # No starvation: an allowed tenant with a due attempt is passed over at most
                # (tenants with due attempts when its wait began) - 1 times.
                for other in due_tenants - {tenant}:
                    if model.allowed(other):
                        if other not in model.passed:
                            model.passed[other] = 0
                            model.bound[other] = len(due_tenants) - 1
                        model.passed[other] += 1
                        assert model.passed[other] <= model.bound[other], \
                            f"{other} passed over {model.passed[other]} times"
                    else:
                        model.passed.pop(other, None)
                model.passed.pop(tenant, None)
                for other in set(model.passed) - due_tenants:
                    model.passed.pop(other)
                model.running.append(tenant)
                model.last_start[tenant] = model.now
        assert share.held == len(model.held)
        assert share.running_by_tenant() == {t: model.running.count(t)
                                             for t in set(model.running)}
        assert share.waiting(model.now) == bool(model.due_tenants())


@settings(max_examples=examples(100), deadline=None)
@given(slots=st.integers(1, 16), share_of=st.sampled_from([0.1, 0.25, 0.5, 1.0]),
       backlog=st.integers(0, 40))
def test_a_lone_tenant_gets_every_slot(slots: int, share_of: float, backlog: int) -> None:
    share: SlotShare[int] = SlotShare(slots, share_of)
    for n in range(backlog):
        share.hold("only", T0 - n * S, n)
    started = [c[2] for _ in range(slots) if (c := share.next_start(T0)) is not None]
    assert len(started) == min(slots, backlog)
    assert started == sorted(range(backlog), reverse=True)[:len(started)], "due order"
