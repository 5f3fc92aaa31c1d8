"""Dependencies as the owner decides them (issue 16), without servers: links, upstream ends
sent in the transaction that ends the run, fan-in, wait windows, conditions, cascades, the
delete refusal, and a takeover in the middle of a fan-in."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from uuid import UUID

from cronlog.domain.dependency import Dependency, DependencyCondition, dependent_run_id
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import spec_to_record
from tests.support.clock import T0
from tests.support.owner import make_owner
from tests.support.owner_inbox import inbound
from tests.support.owner_world import World

UPSTREAM = JobSpec(name="load", tenant="t", queue="q1", handler="echo", cron="0 * * * * *")


def dependent(*upstreams: UUID, condition: DependencyCondition = DependencyCondition.ON_SUCCESS,
              window: timedelta = timedelta(hours=1)) -> JobSpec:
    return JobSpec(name="report", tenant="t", queue="q1", handler="echo",
                   after=Dependency(tuple(upstreams), condition, window))


def test_a_dependent_runs_once_per_upstream_run_that_succeeds_with_its_logical_time() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    assert world.store.jobs[a].dependents == (b,), "linked on the upstream's own log"
    assert world.store.jobs[b].status == "active" and world.store.jobs[b].next_fire_at is None
    world.at(59)
    (run_a,) = world.runs_of(a)
    world.finish(run_a)
    (ended,) = world.written("UpstreamRunEnded")
    same_transaction = next(t for t in world.transport.transactions if ended in t)
    assert "AttemptSucceeded" in [o.name for o in same_transaction], \
        "the end and the message to the dependent commit together"
    (run_b,) = world.runs_of(b)
    assert run_b.trigger == "dependency" and run_b.status == "scheduled"
    assert run_b.logical_time == run_a.scheduled_at == T0 + timedelta(minutes=1)
    assert run_b.chain.upstream_run_ids == (run_a.id,) and run_b.chain.depth == 1
    assert run_b.id == dependent_run_id(b, [run_a.id])
    # Redelivered: recognised, nothing written for it.
    before = len(world.transport.transactions)
    world.send(inbound("UpstreamRunEnded", dict(ended.record), 99_999))
    assert world.runs_of(b) == [run_b]
    assert all(o.name not in ("JobUpstreamRecorded", "RunScheduled")
               for t in world.transport.transactions[before:] for o in t)


def test_a_chain_carries_the_logical_time_and_depth_level_after_level() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    c = world.create(dependent(b), "c")
    world.at(59)
    world.finish(world.runs_of(a)[0])
    world.finish(world.runs_of(b)[0])
    (run_c,) = world.runs_of(c)
    assert run_c.logical_time == T0 + timedelta(minutes=1) and run_c.chain.depth == 2


def test_fan_in_waits_for_every_upstream_of_the_same_logical_time() -> None:
    world = World()
    a1 = world.create(UPSTREAM, "a1")
    a2 = world.create(replace(UPSTREAM, name="load2"), "a2")
    d = world.create(dependent(a1, a2), "d")
    world.at(59)
    first, second = world.runs_of(a1)[0], world.runs_of(a2)[0]
    world.finish(first)
    assert world.runs_of(d) == []
    (waiting,) = world.written("JobUpstreamRecorded")
    assert waiting.record["folded"] == "waiting"
    world.finish(second)
    (run_d,) = world.runs_of(d)
    assert set(run_d.chain.upstream_run_ids) == {first.id, second.id}


def test_a_logical_time_whose_upstreams_never_all_come_is_missed_at_its_window() -> None:
    world = World()
    a1 = world.create(UPSTREAM, "a1")
    a2 = world.create(replace(UPSTREAM, name="load2"), "a2")
    d = world.create(dependent(a1, a2, window=timedelta(seconds=30)), "d")
    world.at(59)
    world.finish(world.runs_of(a1)[0])
    world.at(59 + 29)
    assert world.runs_of(d) == []
    world.at(59 + 31)
    (missed,) = world.runs_of(d)
    assert missed.status == "missed" and missed.trigger == "dependency"
    (recorded,) = world.written("RunMissed")
    assert str(a2) in recorded.record["reason"] and "wait window" in recorded.record["reason"]
    # A2's end after the window is late: nothing more.
    world.finish(world.runs_of(a2)[0])
    assert world.runs_of(d) == [missed]


def test_an_end_that_does_not_meet_the_condition_closes_its_logical_time() -> None:
    world = World()
    a = world.create(replace(UPSTREAM, retry_policy=replace(
        UPSTREAM.retry_policy, max_attempts=1)), "a")
    on_success = world.create(dependent(a), "ok")
    on_failure = world.create(dependent(a, condition=DependencyCondition.ON_FAILURE), "ko")
    world.at(59)
    world.finish(world.runs_of(a)[0], outcome="failed")
    assert world.runs_of(on_success) == []
    (alert_run,) = world.runs_of(on_failure)
    assert alert_run.trigger == "dependency"
    closed = [o for o in world.written("JobUpstreamRecorded") if o.record["folded"] == "closed"]
    assert [str(o.record["job_id"]) for o in closed] == [str(on_success)]


def test_a_job_others_run_after_cannot_be_deleted_and_a_deleted_dependent_unlinks() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    world.send(inbound("DeleteJob", {"request_id": "del-a", "job_id": str(a), "at": T0}))
    refusal = world.written("CommandReply")[-1].record
    assert refusal["ok"] is False and refusal["error_code"] == "FAILED_PRECONDITION"
    assert str(b) in refusal["error_message"]
    world.send(inbound("DeleteJob", {"request_id": "del-b", "job_id": str(b), "at": T0}))
    assert world.store.jobs[a].dependents == ()
    world.send(inbound("DeleteJob", {"request_id": "del-a2", "job_id": str(a), "at": T0}))
    assert world.written("CommandReply")[-1].record["ok"] is True


def test_a_link_to_a_missing_or_other_tenants_job_is_refused_and_recorded() -> None:
    world = World()
    other = world.create(replace(UPSTREAM, tenant="other"), "x")
    b = world.create(dependent(other), "b")
    (unavailable,) = world.written("JobUpstreamUnavailable")
    assert str(unavailable.record["job_id"]) == str(b) and "not found" in unavailable.record["reason"]
    assert world.store.jobs[other].dependents == ()


def test_only_a_cascading_trigger_reaches_the_dependents() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    for request_id, cascade in (("plain", False), ("cascading", True)):
        world.send(inbound("TriggerJob", {"request_id": request_id, "job_id": str(a), "at": T0,
                                          "cascade": cascade}))
    manual = {r.chain.cascade: r for r in world.runs_of(a) if r.trigger == "manual"}
    assert set(manual) == {None, "cascading"}
    for run in manual.values():
        world.finish(run)
    (run_b,) = world.runs_of(b)
    assert run_b.chain.cascade == "cascading" and run_b.chain.upstream_run_ids == (
        manual["cascading"].id,)


def test_a_new_owner_goes_on_with_a_fan_in_its_predecessor_left_waiting() -> None:
    world = World()
    a1 = world.create(UPSTREAM, "a1")
    a2 = world.create(replace(UPSTREAM, name="load2"), "a2")
    d = world.create(dependent(a1, a2, window=timedelta(minutes=5)), "d")
    world.at(59)
    world.finish(world.runs_of(a1)[0])
    # The owner is replaced: the next one knows the fan-in only from the projection.
    world.owner = make_owner(world.store, world.transport, world.clock)
    assert d in world.owner._dependencies.deadlines  # armed from the waiting ends
    world.finish(world.runs_of(a2)[0])
    (run_d,) = world.runs_of(d)
    assert run_d.status == "scheduled" and len(run_d.chain.upstream_run_ids) == 2


def test_a_paused_dependent_records_its_runs_missed() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    world.send(inbound("PauseJob", {"request_id": "p", "job_id": str(b), "at": T0}))
    world.at(59)
    world.finish(world.runs_of(a)[0])
    (run_b,) = world.runs_of(b)
    assert run_b.status == "missed"
    assert world.written("RunMissed")[-1].record["reason"] == "job paused"


def test_a_cascading_backfill_reaches_the_dependents_with_each_fire_time_as_logical_time(
        ) -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    world.send(inbound("BackfillJob", {
        "request_id": "bf", "job_id": str(a), "at": world.clock.at, "cascade": True,
        "after": T0 - timedelta(minutes=3), "until": T0 - timedelta(seconds=1)}))
    backfilled = [r for r in world.runs_of(a) if r.trigger == "backfill"]
    # (11:57, 11:59:59]: 11:58 and 11:59.
    assert len(backfilled) == 2 and all(r.chain.cascade == "bf" for r in backfilled)
    for run in backfilled:
        world.finish(run)
    runs_b = world.runs_of(b)
    assert sorted(r.logical_time for r in runs_b) == sorted(r.scheduled_at for r in backfilled)
    assert {r.chain.cascade for r in runs_b} == {"bf"}


def test_the_dependents_overlap_policy_applies_to_its_dependent_runs() -> None:
    from cronlog.domain.policies import OverlapPolicy

    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(replace(dependent(a), overlap_policy=OverlapPolicy.SKIP), "b")
    world.at(2 * 60 + 30)
    first, second = world.runs_of(a)[:2]
    world.finish(first)
    world.finish(second)  # b's first run has not ended: the second is skipped
    statuses = sorted(r.status for r in world.runs_of(b))
    assert statuses == ["scheduled", "skipped"]


def test_a_dependent_can_be_triggered_by_hand_outside_its_chain() -> None:
    world = World()
    a = world.create(UPSTREAM, "a")
    b = world.create(dependent(a), "b")
    world.send(inbound("TriggerJob", {"request_id": "by-hand", "job_id": str(b), "at": T0}))
    (manual,) = world.runs_of(b)
    assert manual.trigger == "manual" and manual.chain.upstream_run_ids == ()


def test_an_update_that_drops_the_missing_upstream_decides_the_waiting_time_at_once() -> None:
    world = World()
    a1 = world.create(UPSTREAM, "a1")
    a2 = world.create(replace(UPSTREAM, name="load2"), "a2")
    spec = dependent(a1, a2)
    d = world.create(spec, "d")
    world.at(59)
    (first,) = world.runs_of(a1)
    world.finish(first)
    assert world.runs_of(d) == []
    update = replace(spec, after=Dependency((a1,)))
    world.send(inbound("UpdateJob", {"request_id": "u", "job_id": str(d), "at": world.clock.at,
                                     "expected_version": 0, "spec": spec_to_record(update)}))
    (run_d,) = world.runs_of(d)
    assert run_d.chain.upstream_run_ids == (first.id,)
    assert world.store.jobs[a2].dependents == (), "unlinked from the upstream it dropped"
