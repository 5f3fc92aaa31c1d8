"""The owner's decisions, without servers: in-memory transport and store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import (
    Claim,
    Outgoing,
    Produced,
    TransactionRejected,
)
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.limits import TenantLimit, TenantLimits
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import spec_to_record
from cronlog.ports import LogUnavailable
from tests.support.clock import T0, FakeClock
from tests.support.owner import CatchUpAfter, make_owner
from tests.support.owner_inbox import ONE_SHOT, SPEC, create_message, inbound, report
from tests.support.owner_store import FakeStore, sync
from tests.support.owner_transport import FakeTransport, outgoing


def test_create_replies_and_writes_the_event_in_one_transaction() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    assert len(transport.transactions) == 1
    names = [o.name for o in transport.transactions[0]]
    assert names == ["JobCreated", "JobRequestApplied", "CommandReply"]
    reply = transport.transactions[0][2]
    assert reply.topic == "replies" and reply.record["ok"] is True
    # Keyed as the command and its events are: the reply's partition is one the owner's
    # transaction spans anyway, not one more of up to 1,024.
    job_key = str(job_id_for_request(SPEC.tenant, "r1"))
    assert reply.key == job_key == transport.transactions[0][0].key
    assert store.applied == [(0, 1, ["JobCreated", "JobRequestApplied"])]


def test_due_job_fires_each_time_within_the_lookahead_once() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    fired = transport.transactions[-1]
    scheduled = [o.record["scheduled_at"] for o in fired if o.name == "RunScheduled"]
    # Lookahead 2 s from 12:00:01: the 12:00:02 fire time only.
    assert scheduled == [T0 + timedelta(seconds=2)]
    dispatches = [o for o in fired if o.name == "Dispatch"]
    assert len(dispatches) == 1
    assert dispatches[0].topic == "dispatch.q1"
    assert dispatches[0].record["payload"] == b"hello"
    assert dispatches[0].record["idempotency_key"] == str(dispatches[0].record["run_id"])
    sync(store, transport)
    owner.cycle()  # nothing new is due yet: no transaction, no second run of 12:00:02
    assert len(transport.transactions) == 2
    clock.at = T0 + timedelta(seconds=3)
    owner.cycle()
    again = [o.record["scheduled_at"] for o in transport.transactions[-1]
             if o.name == "RunScheduled"]
    assert again == [T0 + timedelta(seconds=4)]


def test_handing_over_dispatches_everything_due_within_the_reach_then_fires_as_before() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=1)
    owner.hand_over(timedelta(seconds=7), within=10.0)
    handed = [o.record["scheduled_at"] for t in transport.transactions[1:] for o in t
              if o.name == "RunScheduled"]
    dispatched = [o for t in transport.transactions[1:] for o in t if o.name == "Dispatch"]
    # Everything due by 12:00:08 (a reach of 7 s from 12:00:01), each once, dispatched.
    assert handed == [T0 + timedelta(seconds=s) for s in (2, 4, 6, 8)]
    assert len(dispatched) == 4
    # An owner that stays after all fires a lookahead ahead again: at 12:00:09, 12:00:10.
    handed_over = len(transport.transactions)
    for second in (7, 9):
        clock.at = T0 + timedelta(seconds=second)
        owner.cycle()
    assert [o.record["scheduled_at"] for t in transport.transactions[handed_over:] for o in t
            if o.name == "RunScheduled"] == [T0 + timedelta(seconds=10)]


def test_partitions_about_to_move_are_handed_over_with_their_reach_dispatched() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=1)
    before = len(transport.transactions)
    owner.handing_over([5], timedelta(seconds=7))  # not this owner's: nothing to do
    assert len(transport.transactions) == before
    # A cooperative rebalance moves partition 0: everything due by 12:00:08 goes in one
    # transaction (no new input), then the partition is forgotten and nothing more fires.
    owner.handing_over([0], timedelta(seconds=7))
    assert len(transport.transactions) == before + 1
    handed = [o.record["scheduled_at"] for o in transport.transactions[-1]
              if o.name == "RunScheduled"]
    assert handed == [T0 + timedelta(seconds=s) for s in (2, 4, 6, 8)]
    assert sum(o.name == "Dispatch" for o in transport.transactions[-1]) == 4
    owner.revoked([0])
    clock.at = T0 + timedelta(seconds=9)
    owner.cycle()
    assert len(transport.transactions) == before + 1


def test_a_hand_over_that_cannot_commit_leaves_the_owner_to_re_read_its_state() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=1)

    def rejected(outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        raise TransactionRejected("the group is rebalancing")

    transport.transact = rejected  # type: ignore[method-assign]
    owner.handing_over([0], timedelta(seconds=7))
    assert owner.resyncing


def test_a_partition_fires_only_once_caught_up_and_its_inbox_waits_until_then() -> None:
    store, clock = FakeStore(replays=True), FakeClock()
    first = FakeTransport()
    creator = make_owner(store, first, clock)
    first.inbox.append(create_message(SPEC))
    creator.cycle()
    assert store.jobs, "a job due every 2 s is in the state"

    class SlowReplay:
        def start(self, claims: Sequence[Claim]) -> CatchUpAfter:
            return CatchUpAfter(list(claims), rounds=4)

    transport = FakeTransport()
    owner = make_owner(store, transport, clock, replay=SlowReplay())
    assert owner.epochs == {} and transport.held == {0}, "taken, not caught up"
    clock.at = T0 + timedelta(seconds=1)
    for _ in range(2):
        owner.cycle()
    assert transport.transactions == [], "nothing decided before the catch-up"
    owner.cycle()
    assert owner.epochs and transport.held == set(), "caught up: owned, its inbox let through"
    assert [o.record["scheduled_at"] for o in transport.transactions[-1]
            if o.name == "RunScheduled"] == [T0 + timedelta(seconds=2)]


class SlowTransport(FakeTransport):
    """Its transactions take 1.5 s of the owner's monotonic clock."""

    def __init__(self, monotonic: FakeClock) -> None:
        super().__init__()
        self.monotonic = monotonic

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        self.monotonic.advance(1.5)
        return super().transact(outgoing)


def test_an_owner_whose_cycles_are_slow_fires_further_ahead_by_as_much() -> None:
    store, clock, monotonic = FakeStore(), FakeClock(), FakeClock()
    transport = SlowTransport(monotonic)
    owner = make_owner(store, transport, clock, monotonic=monotonic)
    transport.inbox.append(create_message(replace(SPEC, cron="* * * * * *")))
    owner.cycle()
    sync(store, transport)
    clock.at = T0 + timedelta(milliseconds=500)
    owner.cycle()
    fired = [o.record["scheduled_at"] for o in transport.transactions[-1]
             if o.name == "RunScheduled"]
    assert fired == [T0 + timedelta(seconds=s) for s in (1, 2)], "the lookahead, 2 s"
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    fired = [o.record["scheduled_at"] for o in transport.transactions[-1]
             if o.name == "RunScheduled"]
    # The last cycle's runs were readable 3 s after the one before it read the clock (1.5 s
    # apart, 1.5 s to commit): this one fires 2 s further ahead (what it lost beyond half
    # the lookahead).
    assert fired == [T0 + timedelta(seconds=s) for s in (3, 4, 5)]


def test_a_cycle_with_only_fires_still_goes_through_the_transaction() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=5)
    assert owner.cycle() > 0
    assert len(transport.transactions) == 2


def test_retried_create_gets_the_first_outcome_and_no_second_event() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    transport.inbox.append(create_message(SPEC))
    clock.at = T0 - timedelta(seconds=10)  # keep the job from being due
    owner.cycle()
    last = transport.transactions[-1]
    assert [o.name for o in last] == ["CommandReply"]
    assert last[0].record["ok"] is True and last[0].record["job_version"] == 1
    # The reply says it repeats the first outcome: the api's read of Postgres may come
    # before the owner's apply of the first create.
    first = next(o for o in transport.transactions[0] if o.name == "CommandReply")
    assert first.record["repeated"] is False and last[0].record["repeated"] is True


def test_a_queue_or_handler_the_tenant_may_not_use_is_refused_by_the_owner_too() -> None:
    """A writer that bypasses the api (it checks first) gets the api's answer: a job on an
    undeclared queue would be dispatched to a topic that does not exist, and fail every
    transaction of its partition."""
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    queues = DeclaredQueues.of(["q1", "theirs"], {"t": ["q1"], "other": ["theirs"]},
                               {"t": ["echo"]})
    owner = make_owner(store, transport, clock, queues=queues)
    for request_id, spec, named in (
            ("undeclared", replace(SPEC, queue="nowhere"), "spec.queue"),
            ("foreign", replace(SPEC, queue="theirs"), "spec.queue"),
            ("handler", replace(SPEC, handler="http"), "spec.handler")):
        transport.inbox.append(create_message(spec, request_id))
        owner.cycle()
        written = transport.transactions[-1]
        assert [o.name for o in written] == ["CommandReply"], (request_id, written)
        assert written[0].record["error_code"] == "INVALID_ARGUMENT", request_id
        assert written[0].record["error_field"] == named, request_id
    assert store.applied == []
    transport.inbox.append(create_message(SPEC, "fine"))
    owner.cycle()
    sync(store, transport)
    (job_id,) = store.jobs
    transport.inbox.append(inbound("UpdateJob", {
        "request_id": "move", "job_id": str(job_id), "at": T0, "expected_version": 1,
        "spec": spec_to_record(replace(SPEC, queue="nowhere"))}))
    owner.cycle()
    (reply,) = [o for o in transport.transactions[-1] if o.name == "CommandReply"]
    assert (reply.record["error_code"], reply.record["error_field"]) == (
        "INVALID_ARGUMENT", "spec.queue")
    assert not [o for o in transport.transactions[-1] if o.name == "JobUpdated"]


def test_invalid_spec_reaching_the_owner_is_rejected_without_events() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    bad = JobSpec(**{**SPEC.__dict__, "time_zone": "Nowhere/Land"})
    transport.inbox.append(create_message(bad))
    owner.cycle()
    assert [o.name for o in transport.transactions[0]] == ["CommandReply"]
    assert transport.transactions[0][0].record["error_code"] == "INVALID_ARGUMENT"
    assert store.applied == []


def test_events_for_partitions_no_longer_owned_are_not_applied() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    owner.revoked([0])
    assert owner.epochs == {}
    transport.inbox.append(create_message(SPEC, "r2"))
    assert owner.cycle() == 0


def started_job(store: FakeStore, transport: FakeTransport, clock: FakeClock,
                spec: JobSpec) -> tuple[PartitionOwner, Mapping[str, Any]]:
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(spec))
    owner.cycle()
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    dispatch = next(o.record for o in transport.transactions[-1] if o.name == "Dispatch")
    run_id = UUID(str(dispatch["run_id"]))
    # The projection would now hold the run: keep the aggregate as the store would.
    job = store.jobs[UUID(str(dispatch["job_id"]))]
    store.runs[run_id] = Run.schedule(job, dispatch["scheduled_at"], "schedule", clock.at)
    store.runs[run_id].collect_events()
    sync(store, transport)
    transport.inbox.append(inbound("AttemptStartedReport", {
        "run_id": str(run_id), "job_id": dispatch["job_id"], "attempt": 1, "worker": "w",
        "started_at": clock.at}))
    owner.cycle()
    return owner, dispatch


def test_heartbeats_keep_an_attempt_alive_and_silence_loses_it() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner, dispatch = started_job(store, transport, clock, ONE_SHOT)
    run_id = UUID(str(dispatch["run_id"]))
    assert run_id in owner.deadlines
    store.runs[run_id].start(1, "w", clock.at, clock.at)
    store.runs[run_id].collect_events()
    for _ in range(3):
        clock.at += timedelta(seconds=4)
        transport.inbox.append(inbound("HeartbeatReport", {
            "run_id": str(run_id), "job_id": dispatch["job_id"], "attempt": 1, "worker": "w",
            "at": clock.at}))
        owner.cycle()
        assert not any(o.name == "AttemptLost" for o in transport.transactions[-1])
    clock.at += timedelta(seconds=6)
    owner.cycle()
    names = [o.name for o in transport.transactions[-1]]
    assert names[:2] == ["AttemptLost", "AttemptDispatched"], "lost, then retried"
    retry = next(o.record for o in transport.transactions[-1] if o.name == "Dispatch")
    assert retry["attempt"] == 2 and retry["run_id"] == dispatch["run_id"]
    assert run_id not in owner.deadlines


class RejectingTransport(FakeTransport):
    def __init__(self, fenced: bool) -> None:
        super().__init__()
        self.fenced = fenced
        self.reject = False

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        if self.reject:
            from cronlog.commands.owner.ports import TransactionRejected

            error = TransactionRejected("coordinator said no")
            error.fenced = self.fenced
            raise error
        return super().transact(outgoing)


def test_a_rejected_transaction_rewinds_and_takes_a_new_epoch_before_going_on() -> None:
    store, clock = FakeStore(), FakeClock()
    transport = RejectingTransport(fenced=False)
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    epoch = owner.epochs[0]
    transport.reject = True
    clock.at = T0 + timedelta(seconds=1)
    assert owner.cycle() == 0
    transport.reject = False
    assert owner.cycle() == 0, "the first cycle after a failure only re-reads state"
    assert transport.rewinds == 1 and owner.epochs[0] == epoch + 1
    owner.cycle()
    fired = [o.record["scheduled_at"] for o in transport.transactions[-1]
             if o.name == "RunScheduled"]
    assert fired == [T0 + timedelta(seconds=2)]


def test_a_fenced_owner_stops_writing_for_good() -> None:
    import pytest

    from cronlog.commands.owner.ports import OwnerReplaced

    store, clock = FakeStore(), FakeClock()
    transport = RejectingTransport(fenced=True)
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    transport.reject = True
    clock.at = T0 + timedelta(seconds=1)
    with pytest.raises(OwnerReplaced):
        owner.cycle()
    assert owner.epochs == {}


def replaying_owner(spec: JobSpec) -> tuple[FakeStore, FakeTransport, FakeClock, PartitionOwner,
                                            UUID]:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(spec))
    owner.cycle()
    return store, transport, clock, owner, job_id_for_request(spec.tenant, "r1")


def test_cancel_run_ends_it_and_tells_the_worker_on_the_dispatch_partition() -> None:
    store, transport, clock, owner, job_id = replaying_owner(ONE_SHOT)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    (run,) = store.runs.values()
    transport.inbox.append(report("AttemptStartedReport", run, started_at=clock.at))
    owner.cycle()
    assert run.id in owner.deadlines
    cancel = {"request_id": "c1", "job_id": str(job_id), "run_id": str(run.id), "at": clock.at}
    transport.inbox.append(inbound("CancelRun", cancel))
    owner.cycle()
    assert [o.name for o in transport.transactions[-1]] == [
        "AttemptCancelled", "CancelAttempt", "RunCancelled", "JobRequestApplied", "CommandReply"]
    (tell,) = outgoing(transport, "CancelAttempt")
    assert tell.topic == "dispatch.q1" and tell.key == str(job_id) and tell.record["attempt"] == 1
    assert outgoing(transport, "CommandReply")[0].record["ok"] is True
    assert store.runs[run.id].status == "cancelled" and run.id not in owner.deadlines
    transport.inbox.append(inbound("CancelRun", cancel))  # a retry: same answer, no events
    owner.cycle()
    assert [o.name for o in transport.transactions[-1]] == ["CommandReply"]
    assert outgoing(transport, "CommandReply")[0].record["ok"] is True
    transport.inbox.append(report("AttemptFinishedReport", run, finished_at=clock.at,
                                  outcome="succeeded", output=b"", output_truncated=False))
    owner.cycle()
    assert store.runs[run.id].status == "cancelled", "a late report changes nothing"


def test_buffer_one_run_is_dispatched_when_the_run_before_it_ends() -> None:
    import dataclasses

    from cronlog.domain.policies import OverlapPolicy

    spec = dataclasses.replace(SPEC, cron="* * * * * *", overlap_policy=OverlapPolicy.BUFFER_ONE)
    store, transport, clock, owner, job_id = replaying_owner(spec)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    (first,) = store.runs.values()
    assert first.scheduled_at == T0 + timedelta(seconds=1), "fired when due, not ahead"
    transport.inbox.append(report("AttemptStartedReport", first, started_at=clock.at))
    clock.at = T0 + timedelta(seconds=2)
    owner.cycle()
    buffered = next(r for r in store.runs.values() if r.id != first.id)
    assert buffered.held and outgoing(transport, "Dispatch") == []
    clock.at = T0 + timedelta(seconds=3)
    owner.cycle()
    assert [r.status for r in store.runs.values()].count("skipped") == 1
    assert job_id in owner.holding
    transport.inbox.append(report("AttemptFinishedReport", first, finished_at=clock.at,
                                  outcome="succeeded", output=b"", output_truncated=False))
    clock.at = T0 + timedelta(seconds=3, milliseconds=500)
    owner.cycle()
    (dispatch,) = outgoing(transport, "Dispatch")
    assert dispatch.record["run_id"] == str(buffered.id)
    assert not store.runs[buffered.id].held and job_id not in owner.holding


def test_pausing_cancels_runs_pre_enqueued_but_not_started() -> None:
    store, transport, clock, owner, job_id = replaying_owner(SPEC)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    (pending,) = store.runs.values()
    assert pending.not_before > clock.at, "pre-enqueued within the lookahead"
    transport.inbox.append(inbound("PauseJob", {"request_id": "p1", "job_id": str(job_id),
                                                "at": clock.at}))
    owner.cycle()
    names = [o.name for o in transport.transactions[-1]]
    assert names[:4] == ["JobPaused", "AttemptCancelled", "CancelAttempt", "RunCancelled"]
    assert store.runs[pending.id].status == "cancelled"


def test_a_tenant_at_its_in_flight_limit_waits_and_others_fire() -> None:
    import dataclasses

    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    limits = TenantLimits(overrides={"busy": TenantLimit(max_jobs=10, max_in_flight=2)})
    owner = make_owner(store, transport, clock, limits)
    every_second = dataclasses.replace(SPEC, cron="* * * * * *")
    for n in range(3):
        transport.inbox.append(create_message(dataclasses.replace(every_second, tenant="busy"),
                                              request_id=f"busy-{n}"))
    transport.inbox.append(create_message(every_second, request_id="other"))
    owner.cycle()
    clock.at = T0 + timedelta(milliseconds=500)
    owner.cycle()
    scheduled = [o.record for o in transport.transactions[-1] if o.name == "RunScheduled"]
    by_tenant = Counter(str(r["tenant"]) for r in scheduled)
    assert by_tenant["busy"] == 2, "two in flight at most; the rest wait"
    assert by_tenant["t"] == 2, "another tenant fires all its fire times in the lookahead"
    (alert,) = [o for o in transport.transactions[-1] if o.name == "Alert"]
    assert alert.record["tenant"] == "busy" and alert.record["kind"] == "tenant_in_flight_limit"
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    assert not any(o.name == "Alert" for o in transport.transactions[-1]), "alerted once"
    busy_run = next(r for r in store.runs.values() if r.tenant == "busy")
    transport.inbox.append(report("AttemptFinishedReport", busy_run, finished_at=clock.at,
                                  outcome="succeeded", output=b"", output_truncated=False))
    owner.cycle()
    later = [o.record for o in transport.transactions[-1] if o.name == "RunScheduled"]
    assert [str(r["tenant"]) for r in later].count("busy") == 1, "one ended, one more fires"


def test_runs_enqueued_a_minute_ahead_do_not_fill_the_in_flight_limit() -> None:
    """Every-minute jobs spread over the minute all get their next run enqueued ahead under a
    limit of two, as no two of them occupy capacity at once; three due at the same second
    are a burst, and only two of them fit."""
    import dataclasses

    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    limits = TenantLimits(overrides={"t": TenantLimit(max_jobs=100, max_in_flight=2)})
    owner = make_owner(store, transport, clock, limits, sparse_lookahead=timedelta(seconds=60))
    spread = (15, 25, 35, 45, 55)
    for second in spread:
        transport.inbox.append(create_message(
            dataclasses.replace(SPEC, cron=f"{second} * * * * *", time_zone="UTC"),
            request_id=f"spread-{second}"))
    for n in range(3):
        transport.inbox.append(create_message(
            dataclasses.replace(SPEC, cron="5 * * * * *", time_zone="UTC"),
            request_id=f"burst-{n}"))
    owner.cycle()
    clock.at = T0 + timedelta(milliseconds=500)
    owner.cycle()
    scheduled = Counter(r.scheduled_at.second for r in store.runs.values())
    assert scheduled == {**{s: 1 for s in spread}, 5: 2}, scheduled


def test_runs_kept_in_memory_are_dropped_when_a_transaction_is_rejected() -> None:
    store, clock = FakeStore(replays=True), FakeClock()
    transport = RejectingTransport(fenced=False)
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(ONE_SHOT))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    (run,) = store.runs.values()
    transport.inbox.append(report("AttemptStartedReport", run, started_at=clock.at))
    owner.cycle()
    assert run.id in owner.run_cache
    finished = report("AttemptFinishedReport", run, finished_at=clock.at, outcome="succeeded",
                      output=b"", output_truncated=False)
    transport.reject = True
    transport.inbox.append(finished)
    owner.cycle()  # the run succeeds in memory, but nothing commits
    transport.reject = False
    owner.cycle()  # re-reads state
    assert len(owner.run_cache) == 0
    transport.inbox.append(finished)  # redelivered after the rewind
    owner.cycle()
    assert [o.name for o in transport.transactions[-1]][:1] == ["AttemptSucceeded"]
    assert store.runs[run.id].status == "succeeded"


class UnseekableTransport(RejectingTransport):
    """Its rewind fails (librdkafka refuses a seek between fetch states) until told not to."""

    def __init__(self) -> None:
        super().__init__(fenced=False)
        self.seek_fails = True

    def rewind(self) -> None:
        self.rewinds += 1
        if self.seek_fails:
            raise LogUnavailable("cannot rewind inbox partitions 0@3: Local: Erroneous state")


def test_an_owner_that_cannot_rewind_decides_nothing_until_it_can() -> None:
    store, clock = FakeStore(), FakeClock()
    transport = UnseekableTransport()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    transport.reject = True
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    transport.reject = False
    committed = len(transport.transactions)
    for _ in range(3):
        clock.at += timedelta(seconds=1)
        assert owner.cycle() == 0
    assert transport.rewinds == 3
    assert len(transport.transactions) == committed, "it went on past input it never applied"
    transport.seek_fails = False
    clock.at += timedelta(seconds=1)
    assert owner.cycle() == 0, "the first cycle after a rewind only re-reads state"
    assert owner.cycle() > 0


def test_jobs_whose_runs_are_far_apart_are_pre_enqueued_the_sparse_lookahead_ahead() -> None:
    store, transport, clock = FakeStore(), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock, sparse_lookahead=timedelta(seconds=60))
    once = JobSpec(name="once", tenant="t", queue="q1", handler="echo",
                   at=T0 + timedelta(seconds=45))
    minutely = JobSpec(name="minutely", tenant="t", queue="q1", handler="echo",
                       cron="30 * * * * *")
    dense = JobSpec(name="dense", tenant="t", queue="q1", handler="echo", cron="* * * * * *")
    for i, spec in enumerate((once, minutely, dense)):
        transport.inbox.append(create_message(spec, f"r{i}"))
    owner.cycle()
    sync(store, transport)

    def fired_by_job() -> dict[str, list[datetime]]:
        names = {j.id: j.spec.name for j in store.jobs.values()}
        fired: dict[str, list[datetime]] = {}
        for o in transport.transactions[-1]:
            if o.name == "RunScheduled":
                fired.setdefault(names[UUID(str(o.record["job_id"]))], []).append(
                    o.record["scheduled_at"])
        return fired

    clock.at = T0 + timedelta(seconds=10)
    owner.cycle()
    fired = fired_by_job()
    # A one-off job and a once-a-minute job: their runs go to the workers up to 60 s early.
    assert fired["once"] == [T0 + timedelta(seconds=45)]
    assert fired["minutely"] == [T0 + timedelta(seconds=30)]
    # An every-second job only within the 2 s lookahead, however long it has waited.
    assert max(fired["dense"]) == T0 + timedelta(seconds=12)
    dispatched = {o.record["run_id"]: o.record["not_before"] for o in transport.transactions[-1]
                  if o.name == "Dispatch"}
    assert T0 + timedelta(seconds=45) in dispatched.values(), "held by the worker until due"
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=40)
    owner.cycle()
    fired = fired_by_job()
    assert fired["minutely"] == [T0 + timedelta(seconds=90)], "the next minute's, 50 s early"
    assert "once" not in fired
    assert max(fired["dense"]) == T0 + timedelta(seconds=42)
