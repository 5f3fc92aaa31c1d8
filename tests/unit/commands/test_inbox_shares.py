"""Each tenant decides for its share of an owner cycle (issue 33, DESIGN invariant 12):
another tenant's command is decided in the cycle that polls it, whatever a busy tenant has
queued ahead of it in the partition; the busy tenant's messages are deferred, decided in
order and once each by the next cycles, and the partition's offset is committed only up to
its first deferred message; only a command (decided once by its request id) overtakes a
deferred message, never one with the same key (a report's is its job's), and never a
report or a relay."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import uuid4

from cronlog.commands.owner.inbox_shares import InboxShares, overtakes, tenant_of
from cronlog.commands.owner.owner_cycle import Cycle, RunCache
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.domain.catalogue import Relay, Report
from cronlog.domain.ids import job_id_for_request
from cronlog.ports import InboundMessage
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import SPEC, create_message
from tests.support.owner_store import FakeStore, sync
from tests.support.owner_transport import KafkaLikeTransport, created

# A budget of 625 ms and a share of a fifth: a tenant's share is 125 ms, so a tenant whose
# messages cost 125 ms each decides one a cycle while others are decided beside it.
BUDGET = timedelta(milliseconds=625)
SHARE = 0.2
COST = 0.125
B = replace(SPEC, tenant="b", cron="0 0 1 1 *")
A = replace(SPEC, tenant="a", cron="0 0 1 1 *")


def keyed(spec: Any, request_id: str, offset: int) -> InboundMessage:
    """A CreateJob as the Kafka transport hands it out: at its offset, keyed by its job."""
    message = create_message(spec, request_id)
    return message._replace(offset=offset,
                   key=str(job_id_for_request(spec.tenant, request_id)))


def relay(tenant: str, offset: int, key: str = "calendar-of-a") -> InboundMessage:
    return InboundMessage("inbox", 0, offset, Relay.CALENDAR_SUBSCRIBED,
                          {"tenant": tenant, "calendar_id": key}, b"", key)


def costly_for(owner: PartitionOwner, monotonic: FakeClock, tenant: str) -> list[str]:
    """Makes the tenant's CreateJobs cost COST of the owner's clock; returns the request ids
    of every CreateJob decided, in order."""
    decided: list[str] = []
    handler = owner._handler_of["CreateJob"]

    def handle(record: Any, now: Any, cycle: Any) -> None:
        decided.append(str(record["request_id"]))
        if record["spec"]["tenant"] == tenant:
            monotonic.advance(COST)
        handler(record, now, cycle)

    owner._handler_of["CreateJob"] = handle
    return decided


def recording(owner: PartitionOwner, name: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    owner._handler_of[name] = lambda record, now, cycle: seen.append(dict(record))
    return seen


def owner_with(transport: KafkaLikeTransport) -> tuple[PartitionOwner, FakeClock,
                                                      FakeStore]:
    store, monotonic = FakeStore(replays=True), FakeClock()
    owner = make_owner(store, transport, FakeClock(), monotonic=monotonic,
                       cycle_budget=BUDGET, tenant_share=SHARE)
    return owner, monotonic, store


def test_another_tenants_command_is_decided_beside_a_busy_tenants_queue() -> None:
    transport = KafkaLikeTransport()
    owner, monotonic, store = owner_with(transport)
    decided = costly_for(owner, monotonic, "b")
    transport.inbox += [keyed(B, f"b{i}", i) for i in range(5)] + [keyed(A, "a0", 5)]
    owner.cycle()
    # b0 takes B's share; b1-b4 wait for the next cycles; A's command is decided now.
    assert created(transport.transactions[0]) == ["b0", "a0"]
    assert transport.committed[0] == {0: 1}, "committed up to B's first deferred message"
    assert [m.offset for m in transport.inbox] == [1, 2, 3, 4], "B's rest put back in order"
    for _ in range(4):
        owner.cycle()
    assert [created(t) for t in transport.transactions] == [
        ["b0", "a0"], ["b1"], ["b2"], ["b3"], ["b4"]]
    assert decided == ["b0", "a0", "b1", "b2", "b3", "b4"], "each decided once"
    assert [c[0] for c in transport.committed] == [1, 2, 3, 4, 6]
    assert len(store.jobs) == 6
    owner.cycle()
    assert len(transport.transactions) == 5, "nothing left, nothing more written"


def test_a_command_decided_ahead_of_a_deferred_one_is_answered_the_same_when_read_again(
        ) -> None:
    """After a crash the partition is read again from its committed offset, before the
    command that overtook: deciding it again answers it as the first time, and writes no
    event."""
    transport = KafkaLikeTransport()
    owner, monotonic, store = owner_with(transport)
    costly_for(owner, monotonic, "b")
    transport.inbox += [keyed(B, "b0", 0), keyed(B, "b1", 1), keyed(A, "a0", 2)]
    owner.cycle()
    assert created(transport.transactions[0]) == ["b0", "a0"]
    first = next(o.record for o in transport.transactions[0]
                 if o.name == "CommandReply" and o.record["request_id"] == "a0")
    sync(store, transport)
    transport.inbox[:] = [keyed(B, "b1", 1), keyed(A, "a0", 2)]  # read again from offset 1
    owner.cycle()
    again = [o for o in transport.transactions[-1] if o.record.get("request_id") == "a0"]
    assert [o.name for o in again] == ["CommandReply"], "no second JobCreated"
    assert again[0].record["job_id"] == first["job_id"] and again[0].record["ok"] is True


def test_a_relay_behind_a_deferred_message_waits_for_it() -> None:
    transport = KafkaLikeTransport()
    owner, monotonic, _ = owner_with(transport)
    decided = costly_for(owner, monotonic, "b")
    relays = recording(owner, Relay.CALENDAR_SUBSCRIBED)
    transport.inbox += [keyed(B, "b0", 0), keyed(B, "b1", 1), relay("a", 2),
                        keyed(A, "a0", 3)]
    owner.cycle()
    assert decided == ["b0", "a0"]
    assert relays == [], "a relay never overtakes: its key's order is the inbox's"
    owner.cycle()
    assert decided == ["b0", "a0", "b1"]
    assert [r["tenant"] for r in relays] == ["a"]
    assert [c[0] for c in transport.committed] == [1, 4]


def test_a_tenant_alone_gets_cycle_after_cycle() -> None:
    transport = KafkaLikeTransport()
    owner, monotonic, _ = owner_with(transport)
    decided = costly_for(owner, monotonic, "b")
    transport.inbox += [keyed(B, f"b{i}", i) for i in range(3)]
    for _ in range(3):
        owner.cycle()
    assert decided == ["b0", "b1", "b2"]
    assert [created(t) for t in transport.transactions] == [["b0"], ["b1"], ["b2"]]


# -- the shares, on their own ---------------------------------------------------------------

def _shares() -> tuple[InboxShares, list[float]]:
    clock = [0.0]
    return InboxShares(0.1, lambda: clock[0]), clock


def test_a_tenant_is_over_its_share_once_it_has_spent_it() -> None:
    shares, clock = _shares()
    assert not shares.over("b")
    shares.charge("b", 0.0)
    assert not shares.over("b"), "nothing spent yet"
    clock[0] = 0.1
    shares.charge("b", 0.0)
    assert shares.over("b") and not shares.over("a")
    assert not shares.over(None), "a message of no tenant is charged to no one"


def test_a_tenant_is_over_its_share_after_its_messages_however_cheap() -> None:
    shares = InboxShares(0.1, lambda: 0.0, messages=3)
    for _ in range(3):
        assert not shares.over("b")
        shares.charge("b", 0.0)
    assert shares.over("b") and not shares.over("a")


def test_only_a_command_with_another_key_overtakes_a_deferred_message() -> None:
    shares, _ = _shares()
    b0, a0 = keyed(B, "b0", 0), keyed(A, "a0", 1)
    shares.defer(0, b0)
    assert not shares.holds_back(a0)
    assert shares.holds_back(a0._replace(key=b0.key)), "same key: in order"
    assert shares.holds_back(relay("a", 2)), "a relay never overtakes"
    assert not shares.holds_back(relay("a", 2)._replace(partition=1)), "another partition"
    no_request = a0._replace(record={**a0.record, "request_id": None})
    assert not overtakes(no_request) and shares.holds_back(no_request)
    shares.defer(3, relay("b", 3)._replace(key=None))
    assert shares.holds_back(a0), "a deferred message with no key holds back the partition"


def report_of(job_key: str, offset: int) -> InboundMessage:
    """A worker report as the transport hands it out of a WorkerReports message: no key."""
    return InboundMessage("inbox", 0, offset, Report.ATTEMPT_FINISHED,
                          {"run_id": str(uuid4()), "job_id": job_key, "attempt": 1}, b"")


def test_a_deferred_report_holds_back_only_what_is_about_its_job() -> None:
    shares, _ = _shares()
    b0, a0 = keyed(B, "b0", 0), keyed(A, "a0", 3)
    shares.defer(0, b0)
    behind = report_of(str(job_id_for_request("b", "b9")), 1)
    assert shares.holds_back(behind), "a report never overtakes"
    shares.defer(1, behind)
    assert not shares.holds_back(a0), "another job's command passes the deferred report"
    assert shares.holds_back(a0._replace(key=behind.record["job_id"])), \
        "a command about the report's job waits for it"
    shares.defer(2, report_of("not-a-uuid", 2))
    assert shares.holds_back(a0), "a report naming no job holds back the partition"


def test_another_tenants_command_passes_a_report_held_behind_a_busy_tenant() -> None:
    """A report read behind a busy tenant's deferred commands waits with them; another
    tenant's command behind both is still decided in the cycle that polls it."""
    transport = KafkaLikeTransport()
    owner, monotonic, _ = owner_with(transport)
    decided = costly_for(owner, monotonic, "b")
    reports = recording(owner, Report.ATTEMPT_FINISHED)
    transport.inbox += [keyed(B, "b0", 0), keyed(B, "b1", 1),
                        report_of(str(job_id_for_request("b", "b0")), 2), keyed(A, "a0", 3)]
    owner.cycle()
    assert decided == ["b0", "a0"]
    assert reports == [], "the report waits behind b1, in the inbox's order"
    owner.cycle()
    assert decided == ["b0", "a0", "b1"] and len(reports) == 1
    assert [c[0] for c in transport.committed] == [1, 4]


def test_the_tenant_a_message_is_charged_to() -> None:
    store = FakeStore()
    cycle = Cycle(store, RunCache(), dispatch_until=T0)
    assert tenant_of(keyed(B, "b0", 0), cycle) == "b", "a CreateJob's spec"
    assert tenant_of(relay("a", 0), cycle) == "a", "a relay names it"
    report = InboundMessage("inbox", 0, 0, "AttemptStartedReport", {"tenant": "a"}, b"")
    assert tenant_of(report, cycle) is None, "reports are never charged"
    job_id = job_id_for_request("a", "missing")
    pause = InboundMessage("inbox", 0, 0, "PauseJob",
                           {"request_id": "p", "job_id": str(job_id)}, b"")
    assert tenant_of(pause, cycle) is None, "no such job: charged to no one"
    bad = pause._replace(record={"request_id": "p", "job_id": "not-a-uuid"})
    assert tenant_of(bad, cycle) is None
