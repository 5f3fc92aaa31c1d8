"""An owner cycle decides for its budget, then commits what it decided (issue 33, DESIGN
invariant 12): the messages it had no time for are decided first by the next cycle, in
order and once each, their offsets committed only then; due jobs it had no time for fire in
the next cycle, each fire time once. The owner's monotonic clock is a fake that each
decided message (or fired job) moves on."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from cronlog.commands.owner.cycle_budget import CycleBudget
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.domain.job import Job
from cronlog.ports import InboundMessage
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import SPEC, create_message
from tests.support.owner_metrics import Told
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import KafkaLikeTransport, created

# What deciding one message costs here: a budget of 625 ms gives the inbox 312.5 ms, so a
# cycle decides three messages (it checks between them: 125, 250 ms spent, then 375). Both
# are exact in binary, so the sums of the fake clock are too.
COST = 0.125
BUDGET = timedelta(milliseconds=625)
# These tests are of the budget: one tenant may use all of it (its share of a cycle is
# tests/unit/commands/test_inbox_shares.py's).
ONE_TENANT = None
# Jobs that do not fire while the tests run: their cycles write only what commands do.
LATER = replace(SPEC, cron="0 0 1 1 *")


def costly(owner: PartitionOwner, monotonic: FakeClock, name: str = "CreateJob") -> list[str]:
    """Makes each message `name` cost COST of the owner's clock; returns the request ids
    decided, in order (every round of a cycle)."""
    decided: list[str] = []
    handler = owner._handler_of[name]

    def handle(record: Any, now: Any, cycle: Any) -> None:
        decided.append(str(record["request_id"]))
        monotonic.advance(COST)
        handler(record, now, cycle)

    owner._handler_of[name] = handle
    return decided


def creates(count: int, first_offset: int = 0, spec: Any = LATER) -> list[InboundMessage]:
    return [_at(create_message(spec, f"r{first_offset + i}"), first_offset + i)
            for i in range(count)]


def _at(message: InboundMessage, offset: int) -> InboundMessage:
    return InboundMessage(message.topic, message.partition, offset, message.name,
                          message.record, message.raw)


def test_a_cycle_out_of_budget_commits_what_it_decided_and_the_next_decides_the_rest_in_order(
        ) -> None:
    store, transport, clock = FakeStore(replays=True), KafkaLikeTransport(), FakeClock()
    monotonic, told = FakeClock(), Told()
    owner = make_owner(store, transport, clock, monotonic=monotonic, cycle_budget=BUDGET,
                       tenant_share=ONE_TENANT,
                       metrics=told)
    decided = costly(owner, monotonic)
    transport.inbox += creates(8)
    owner.cycle()
    # 0, 125, 250 ms spent before the first three; 375 ms is past the inbox's 312.5.
    assert created(transport.transactions[0]) == ["r0", "r1", "r2"]
    assert transport.committed[0] == {0: 3}, "offsets committed up to the last decided only"
    assert [m.offset for m in transport.inbox] == [3, 4, 5, 6, 7], "the rest put back, in order"
    (first,) = told.cycles
    assert first.over_budget and first.carried == 5 and first.messages == 3
    owner.cycle()
    owner.cycle()
    # The carried messages come first in the next cycles' polls, and are decided once each.
    assert [m.offset for m in transport.polled[1]] == [3, 4, 5, 6, 7]
    assert [created(t) for t in transport.transactions] == [
        ["r0", "r1", "r2"], ["r3", "r4", "r5"], ["r6", "r7"]]
    assert decided == [f"r{i}" for i in range(8)], "each message decided once, in order"
    assert [c[0] for c in transport.committed] == [3, 6, 8]
    assert [c.over_budget for c in told.cycles] == [True, True, False]
    assert len(store.jobs) == 8
    owner.cycle()
    assert len(transport.transactions) == 3, "nothing left, nothing more written"


def test_a_cycle_within_its_budget_decides_everything_it_polled() -> None:
    store, transport, clock = FakeStore(replays=True), KafkaLikeTransport(), FakeClock()
    monotonic = FakeClock()
    owner = make_owner(store, transport, clock, monotonic=monotonic,
                       cycle_budget=timedelta(seconds=5), tenant_share=ONE_TENANT)
    costly(owner, monotonic)
    transport.inbox += creates(8)
    owner.cycle()
    assert created(transport.transactions[0]) == [f"r{i}" for i in range(8)]
    assert transport.committed == [{0: 8}] and not transport.inbox


def test_a_cycle_stops_only_between_whole_kafka_messages() -> None:
    """Reports of one WorkerReports message share its offset: a committed offset never
    splits one, so the cycle decides all of a Kafka message or none of it."""
    store, transport, clock = FakeStore(replays=True), KafkaLikeTransport(), FakeClock()
    monotonic = FakeClock()
    owner = make_owner(store, transport, clock, monotonic=monotonic, cycle_budget=BUDGET,
                       tenant_share=ONE_TENANT)
    costly(owner, monotonic)
    messages = creates(6)
    # Offsets 0, 1, 2, 2, 2, 3: the budget runs out before the fourth, inside offset 2.
    transport.inbox += [_at(m, o) for m, o in zip(messages, (0, 1, 2, 2, 2, 3), strict=True)]
    owner.cycle()
    assert created(transport.transactions[0]) == ["r0", "r1", "r2", "r3", "r4"]
    assert transport.committed[0] == {0: 3}
    assert [m.offset for m in transport.inbox] == [3]


def test_a_message_that_fails_past_the_budget_of_its_retried_round_is_set_aside_later_once(
        ) -> None:
    """A failing message makes the cycle decide again without it; the second round has
    less budget left and may stop before it: then it is not set aside in this cycle, but
    decided (and set aside) by the next one, once."""
    store, transport, clock = FakeStore(replays=True), KafkaLikeTransport(), FakeClock()
    monotonic = FakeClock()
    owner = make_owner(store, transport, clock, monotonic=monotonic, cycle_budget=BUDGET,
                       tenant_share=ONE_TENANT)
    decided = costly(owner, monotonic)
    bad = _at(create_message(LATER, "bad"), 1)
    bad = InboundMessage(bad.topic, 0, 1, "CreateJob", {**bad.record, "spec": {"oops": 1}},
                         b"")
    transport.inbox += [_at(create_message(LATER, "r0"), 0), bad,
                        *creates(3, first_offset=2)]
    owner.cycle()
    # Round one: r0, then the bad one fails (250 ms spent); round two: r0 again (375 ms),
    # and the inbox's share is spent before the bad one: only r0 is committed.
    assert created(transport.transactions[0]) == ["r0"]
    assert not [o for o in transport.transactions[0] if o.name == "PoisonMessage"]
    assert transport.committed[0] == {0: 1}
    for _ in range(4):
        owner.cycle()
    poisoned = [o for t in transport.transactions for o in t if o.name == "PoisonMessage"]
    assert [p.record["offset"] for p in poisoned] == [1], "set aside once"
    assert sorted(set(decided) - {"bad"}) == ["r0", "r2", "r3", "r4"]
    assert sorted(r for t in transport.transactions for r in created(t)) == [
        "r0", "r2", "r3", "r4"], "each good one created once"
    assert transport.committed[-1] == {0: 5} and not transport.inbox


def test_due_jobs_past_the_budget_fire_in_the_next_cycle_each_fire_time_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, transport, clock = FakeStore(replays=True), KafkaLikeTransport(), FakeClock()
    monotonic, told = FakeClock(), Told()
    owner = make_owner(store, transport, clock, monotonic=monotonic, cycle_budget=BUDGET,
                       tenant_share=ONE_TENANT,
                       metrics=told)
    transport.inbox += creates(12, spec=SPEC)
    owner.cycle()
    assert len(store.jobs) == 12
    fire_due = Job.fire_due

    def costly_fire(self: Job, *args: Any, **kwargs: Any) -> Any:
        monotonic.advance(COST)
        return fire_due(self, *args, **kwargs)

    monkeypatch.setattr(Job, "fire_due", costly_fire)
    clock.at = T0 + timedelta(seconds=1)
    told.cycles.clear()
    fired: list[list[tuple[UUID, Any]]] = []
    for _ in range(4):
        before = len(transport.transactions)
        owner.cycle()
        fired.append([(o.record["job_id"], o.record["scheduled_at"])
                      for t in transport.transactions[before:] for o in t
                      if o.name == "RunScheduled"])
    # The whole budget (625 ms) for due jobs: five a cycle (checked at 125 ... 500 ms spent,
    # then 625).
    assert [len(f) for f in fired] == [5, 5, 2, 0]
    every = [f for cycle in fired for f in cycle]
    assert len(set(every)) == 12 and {at for _, at in every} == {T0 + timedelta(seconds=2)}
    assert [c.over_budget for c in told.cycles[:3]] == [True, True, False]


def test_a_budget_must_be_positive_and_is_measured_from_the_cycle_s_start() -> None:
    with pytest.raises(ValueError):
        CycleBudget(0, lambda: 0.0)
    clock = FakeClock(seconds=10.0)
    budget = CycleBudget(1.0, clock)
    budget.begin(10.0)
    clock.seconds = 10.4
    assert not budget.messages_spent() and not budget.spent() and not budget.hit
    clock.seconds = 10.5
    assert budget.messages_spent() and not budget.spent() and budget.hit
    clock.seconds = 11.0
    assert budget.spent()
    budget.begin(11.0)
    assert not budget.hit


def test_after_a_cycle_out_of_budget_the_next_asks_for_less_then_for_the_batch_again() -> None:
    """A cycle that decided three of 300 messages does not load all 297 again next time."""
    store, transport, clock = FakeStore(replays=True), KafkaLikeTransport(), FakeClock()
    monotonic = FakeClock()
    owner = make_owner(store, transport, clock, monotonic=monotonic, cycle_budget=BUDGET,
                       tenant_share=ONE_TENANT)
    costly(owner, monotonic)
    transport.inbox += creates(300)
    owner.cycle()
    owner.cycle()
    assert [len(p) for p in transport.polled[-2:]] == [300, 100]
    owner._handler_of["CreateJob"] = owner._commands.handlers()["CreateJob"]  # cheap again
    owner.cycle()
    owner.cycle()
    assert [len(p) for p in transport.polled[-2:]] == [100, 294 - 100]
    assert len(store.jobs) == 300 and not transport.inbox
