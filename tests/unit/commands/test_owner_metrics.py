"""What the partition owner tells operators (OwnerMetrics), without servers: once a cycle,
counted from what the cycle committed; and its periodic log line sums the same figures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from cronlog.commands.owner.cycle_tally import tally
from cronlog.commands.owner.cycle_times import CycleTimes
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import (
    Claim,
    CycleTally,
    Outgoing,
    Produced,
    Topics,
)
from cronlog.domain.job import Job
from cronlog.domain.policies import OverlapPolicy, RetryPolicy
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import AvroEventRecords
from cronlog.ports import UNREADABLE
from tests.support.clock import T0, FakeClock
from tests.support.owner import CatchUpAfter
from tests.support.owner_inbox import ONE_SHOT, SPEC, create_message, inbound, report
from tests.support.owner_metrics import Told
from tests.support.owner_store import FakeStore, sync
from tests.support.owner_transport import FakeTransport

JOB_ID = UUID(int=7)
TOPICS = Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}")


class TimedTransport(FakeTransport):
    """Its transactions take 0.25 s of the owner's monotonic clock."""

    def __init__(self, monotonic: FakeClock) -> None:
        super().__init__()
        self.monotonic = monotonic
        self.reject = False

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]:
        self.monotonic.advance(0.25)
        if self.reject:
            from cronlog.commands.owner.ports import TransactionRejected

            raise TransactionRejected("coordinator said no")
        return super().transact(outgoing)


class SlowReplay:
    """A catch-up that takes two advances, 3 s of the owner's monotonic clock each."""

    def __init__(self, monotonic: FakeClock) -> None:
        self.monotonic = monotonic

    def start(self, claims: Sequence[Claim]) -> CatchUpAfter:
        monotonic = self.monotonic

        class Slow(CatchUpAfter):
            def advance(self, seconds: float) -> list[Claim]:
                monotonic.advance(3.0)
                return super().advance(seconds)

        return Slow(list(claims), rounds=2)


def watched(told: Told, store: FakeStore | None = None, replay: SlowReplay | None = None,
            monotonic: FakeClock | None = None
            ) -> tuple[PartitionOwner, FakeStore, TimedTransport, FakeClock, FakeClock]:
    monotonic = monotonic or FakeClock()
    store, transport, clock = store or FakeStore(), TimedTransport(monotonic), FakeClock()

    class Replay:
        def start(self, claims: Sequence[Claim]) -> CatchUpAfter:
            return CatchUpAfter(list(claims))

    owner = PartitionOwner(
        owner_id="o1", transport=transport, store=store, replay=replay or Replay(),
        records=AvroEventRecords(), clock=clock, topics=TOPICS,
        lookahead=timedelta(seconds=2), monotonic=monotonic, metrics=told)
    owner.assigned([0])
    return owner, store, transport, clock, monotonic


def test_each_committed_cycle_is_told_once_with_its_messages_events_and_times() -> None:
    told = Told()
    owner, store, transport, _clock, _ = watched(told)
    assert told.claimed == [1] and told.catch_ups == [(1, 0.0)], "the takeover at assignment"
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    (created,) = told.cycles
    assert created.messages == 1 and created.tally.events == 2  # JobCreated, RequestApplied
    assert created.commit_seconds == 0.25 and created.seconds == 0.25
    assert created.lookahead_seconds == 2.0
    assert not created.tally.runs and not created.tally.refused
    sync(store, transport)
    owner.cycle()  # fires 12:00:02
    sync(store, transport)
    owner.cycle()
    idle = told.cycles[-1]
    assert idle.commit_seconds is None and idle.messages == 0 and idle.tally.events == 0, \
        "a cycle with nothing to commit has no transaction"


def test_fired_runs_are_counted_by_queue_with_the_lead_left_at_the_commit() -> None:
    told = Told()
    owner, store, transport, clock, _ = watched(told)
    transport.inbox.append(create_message(replace(SPEC, queue="reports")))
    owner.cycle()
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    fired = told.cycles[-1].tally
    # Every 2 s, lookahead 2 s from 12:00:01: the 12:00:02 run, committed 0.25 s after
    # the cycle read 12:00:01.
    assert fired.runs == {("created", "reports"): 1}
    assert fired.leads == {"reports": [pytest.approx(0.75)]}
    assert fired.events == 2  # RunScheduled, JobFireAdvanced


def test_ended_runs_dead_letters_and_the_log_line_derive_from_the_same_counts() -> None:
    told = Told()
    owner, store, transport, clock, monotonic = watched(told, FakeStore(replays=True))
    spec = replace(ONE_SHOT, retry_policy=RetryPolicy(max_attempts=1))
    transport.inbox.append(create_message(spec))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    (run,) = store.runs.values()
    transport.inbox.append(report("AttemptStartedReport", run, started_at=clock.at))
    owner.cycle()
    transport.inbox.append(report("AttemptFinishedReport", run, finished_at=clock.at,
                                  outcome="failed", error="boom", output=b"",
                                  output_truncated=False))
    owner.cycle()
    assert told.cycles[-1].tally.runs == {("failed", "q1"): 1, ("dead_lettered", "q1"): 1}
    monotonic.advance(10)
    line = owner_line(owner)
    assert "runs created 1, missed 0, skipped 0, dead-lettered 1" in line
    assert f"{sum(f.messages for f in told.cycles)} messages in" in line
    assert f"{sum(f.tally.events for f in told.cycles)} events out" in line


def owner_line(owner: PartitionOwner) -> str:
    reported = owner._times.report()
    assert reported is not None
    return reported[1]


def test_refused_commands_and_messages_set_aside_are_counted() -> None:
    told = Told()
    owner, _store, transport, _clock, _ = watched(told)
    bad = replace(SPEC, time_zone="Nowhere/Land")
    transport.inbox.append(create_message(bad))
    transport.inbox.append(inbound(UNREADABLE, {"error": "not Avro"}, offset=1))
    owner.cycle()
    counted = told.cycles[-1].tally
    assert counted.refused == {"INVALID_ARGUMENT": 1}
    assert counted.set_aside == 1


def test_a_cycle_not_committed_counts_nothing() -> None:
    told = Told()
    owner, _store, transport, _clock, _ = watched(told)
    transport.inbox.append(create_message(SPEC))
    transport.reject = True
    owner.cycle()
    assert told.cycles == []
    assert owner.resyncing, "state is re-read before anything else is decided"
    transport.reject = False
    owner.cycle()
    assert not owner.resyncing
    assert told.claimed == [1, 1], "the resync took the partition again"


def test_a_slow_catch_up_is_told_with_its_duration() -> None:
    told, monotonic = Told(), FakeClock()
    owner, *_ = watched(told, replay=SlowReplay(monotonic), monotonic=monotonic)
    assert told.claimed == [1] and told.catch_ups == [] and not owner.epochs
    owner.cycle()
    assert told.catch_ups == [(1, 6.0)] and owner.epochs


def test_in_flight_runs_by_tenant_are_a_copy() -> None:
    told = Told()
    owner, store, transport, clock, _ = watched(told)
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    sync(store, transport)
    clock.at = T0 + timedelta(seconds=1)
    owner.cycle()
    counts = owner.in_flight_by_tenant()
    assert counts == {"t": 1}
    counts["t"] += 5
    assert owner.in_flight_by_tenant() == {"t": 1}


def produced(topic: str, name: str, **record: object) -> Produced:
    return Produced(topic, 0, 0, name, dict(record), b"")


def test_tally_counts_what_each_kind_of_message_stands_for() -> None:
    committed = T0
    ended_run = Run.schedule(_job(JobSpec(name="n", tenant="t", queue="billing",
                                          handler="h", cron="* * * * *")), T0, "schedule", T0)
    when_due = _job(JobSpec(name="n", tenant="t", queue="a", handler="h", cron="* * * * *",
                            overlap_policy=OverlapPolicy.SKIP), UUID(int=8))
    counted = tally([
        produced("run-events", "RunScheduled", queue="a", attempt=1, trigger="schedule",
                 not_before=T0 + timedelta(seconds=1.5), job_id=JOB_ID),
        produced("run-events", "RunScheduled", queue="a", attempt=1, trigger="schedule",
                 not_before=T0 - timedelta(seconds=0.2), job_id=str(when_due.id)),
        produced("run-events", "RunScheduled", queue="a", attempt=1, trigger="manual",
                 not_before=T0),
        produced("run-events", "RunScheduled", queue="a", attempt=0, trigger="schedule",
                 not_before=T0),
        produced("run-events", "RunMissed", queue="a"),
        produced("run-events", "RunSkipped", queue="b"),
        produced("run-events", "AttemptSucceeded", run_id=str(ended_run.id)),
        produced("run-events", "RunCancelled", run_id=str(uuid4())),
        produced("run-events", "AttemptStarted", run_id=str(uuid4())),
        produced("job-events", "JobFireAdvanced"),
        produced("dispatch.a", "Dispatch"),
        produced("dead-letters", "DeadLetter", queue="a"),
        produced("poison", "PoisonMessage"),
        produced("replies", "CommandReply", ok=True, error_code=None),
        produced("replies", "CommandReply", ok=False, error_code="NOT_FOUND"),
    ], TOPICS, {ended_run.id: ended_run}, {when_due.id: when_due}, committed)
    assert counted.events == 10
    assert counted.runs == {("created", "a"): 4, ("missed", "a"): 1, ("skipped", "b"): 1,
                            ("succeeded", "billing"): 1, ("cancelled", "unknown"): 1,
                            ("dead_lettered", "a"): 1}
    # Only the run its schedule fired ahead and dispatched at once: a manual run starts
    # when asked, a held one when its job's runs before it end, and a job that fires only
    # when due (its overlap policy must see its runs then) has no lead to keep.
    assert counted.leads == {"a": [1.5]}
    assert counted.set_aside == 1 and counted.refused == {"NOT_FOUND": 1}


def _job(spec: JobSpec, job_id: UUID = JOB_ID) -> Job:
    return Job.restore(job_id, 1, T0, T0, spec=spec, status="active",
                       next_fire_at=T0, last_fired_at=None)


def test_the_log_line_and_the_metrics_get_the_same_figures() -> None:
    clock = FakeClock()
    told = Told()
    times = CycleTimes(timedelta(seconds=2), monotonic=clock, metrics=told)
    times.report()
    first = CycleTally(events=4, set_aside=1)
    first.runs[("created", "a")] = 3
    first.runs[("created", "b")] = 1
    first.runs[("missed", "a")] = 2
    first.leads = {"a": [1.9, 0.4], "b": [1.2]}
    first.refused["NOT_FOUND"] = 2
    times.cycle(1.0, 1.1, 1.3, 1.4, 12, messages=5, tally=first, deferred=3)
    times.cycle(2.0, 2.0, 2.0, 2.0, 0)
    assert [f.seconds for f in told.cycles] == [pytest.approx(0.4), 0.0]
    assert told.cycles[0].commit_seconds == pytest.approx(0.2)
    assert told.cycles[1].commit_seconds is None
    assert told.cycles[0].tally is first and told.cycles[0].messages == 5
    assert told.cycles[0].deferred == 3
    clock.seconds = 10.0
    reported = times.report()
    assert reported is not None
    assert ("2 cycles in the last 10 s (5 messages in, 4 events out; runs created 4, missed "
            "2, skipped 0, dead-lettered 0; 1 messages set aside, 2 commands refused; 0 cycles "
            "out of budget (0 messages left to the next), 3 messages deferred for their "
            "tenant's share; least start lead of a fired run 400 ms); longest") in reported[1]
    clock.seconds = 20.0
    reported = times.report()
    assert reported is not None and "(0 messages in, 0 events out" in reported[1]
    assert "least start lead of a fired run -)" in reported[1]
