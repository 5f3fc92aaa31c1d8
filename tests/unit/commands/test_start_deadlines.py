"""Every attempt has a deadline from its dispatch; a pause stops every attempt not started."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from cronlog.commands.owner.attempt_timers import AttemptTimers
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.spec import JobSpec
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import create_message, report
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport, outgoing

ONE_OFF = JobSpec(name="n", tenant="t", queue="nobody-serves", handler="echo",
                  at=T0 + timedelta(seconds=1),
                  retry_policy=RetryPolicy(max_attempts=2, initial_backoff=timedelta(seconds=1),
                                           max_backoff=timedelta(seconds=1), jitter=0.0))


def test_start_deadlines_come_due_in_order_and_stay_until_settled() -> None:
    deadlines = AttemptTimers()
    a, b, c = uuid4(), uuid4(), uuid4()
    deadlines.expect(a, 1, 0, T0 + timedelta(seconds=3))
    deadlines.expect(b, 1, 0, T0 + timedelta(seconds=1))
    deadlines.expect(c, 1, 1, T0 + timedelta(seconds=2))
    deadlines.settled(c)
    assert [d.run_id for d in deadlines.overdue(T0 + timedelta(seconds=5))] == [b, a]
    # Not settled yet: a cycle decided again sees them again.
    assert [d.run_id for d in deadlines.overdue(T0 + timedelta(seconds=5))] == [b, a]
    deadlines.expect(a, 2, 0, T0 + timedelta(seconds=9))  # retried: a new deadline
    assert [d.run_id for d in deadlines.overdue(T0 + timedelta(seconds=5))] == [b]
    deadlines.drop_partitions([0])
    assert deadlines.overdue(T0 + timedelta(seconds=60)) == [] and len(deadlines) == 0


def test_the_heap_stays_bounded_by_the_attempts_still_waiting() -> None:
    deadlines = AttemptTimers()
    for i in range(10_000):
        run_id = uuid4()
        deadlines.expect(run_id, 1, 0, T0 + timedelta(seconds=i))
        deadlines.settled(run_id)
    keep = uuid4()
    deadlines.expect(keep, 1, 0, T0)
    assert len(deadlines._heap) <= 2 * len(deadlines) + 1025
    assert [d.run_id for d in deadlines.overdue(T0 + timedelta(days=1))] == [keep]


def test_an_attempt_no_worker_starts_is_lost_withdrawn_retried_and_its_queue_alerted() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock, start_timeout=timedelta(seconds=30))
    transport.inbox.append(create_message(ONE_OFF))
    owner.cycle()
    owner.cycle()  # fires it, from the due index the first cycle's events updated
    (run,) = store.runs.values()
    clock.at = T0 + timedelta(seconds=30)
    owner.cycle()
    assert not outgoing(transport, "AttemptLost")
    clock.at = T0 + timedelta(seconds=32)
    owner.cycle()
    lost = outgoing(transport, "AttemptLost")
    assert [o.record["attempt"] for o in lost] == [1]
    assert "not started within" in lost[0].record["reason"]
    [cancel] = outgoing(transport, "CancelAttempt")
    assert cancel.topic == "dispatch.nobody-serves" and cancel.record["attempt"] == 1
    [retry] = outgoing(transport, "Dispatch")
    assert retry.record["attempt"] == 2
    [alert] = outgoing(transport, "Alert")
    assert alert.record["kind"] == "queue_unserved"
    # The retry is not started either: lost again, dead-lettered, no second queue alert.
    clock.at += timedelta(seconds=40)
    owner.cycle()
    assert [o.record["attempt"] for o in outgoing(transport, "AttemptLost")] == [2]
    assert outgoing(transport, "RunFailed")
    assert [a.record["kind"] for a in outgoing(transport, "Alert")] == ["run_dead_lettered"]
    assert store.runs[run.id].status == "dead_lettered"
    assert len(owner.start_deadlines) == 0


def test_a_started_attempt_has_no_start_deadline() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock, start_timeout=timedelta(seconds=30))
    transport.inbox.append(create_message(ONE_OFF))
    owner.cycle()
    owner.cycle()  # fires it, from the due index the first cycle's events updated
    (run,) = store.runs.values()
    assert len(owner.start_deadlines) == 1
    transport.inbox.append(report("AttemptStartedReport", run, started_at=clock.at))
    owner.cycle()
    assert len(owner.start_deadlines) == 0
    clock.at = T0 + timedelta(seconds=40)
    owner.cycle()
    assert store.runs[run.id].status == "running"


def test_a_new_owner_gives_dispatched_attempts_a_start_deadline() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    first = make_owner(store, transport, clock)
    transport.inbox.append(create_message(ONE_OFF))
    first.cycle()
    first.cycle()
    second = make_owner(store, transport, clock, start_timeout=timedelta(seconds=30))
    assert len(second.start_deadlines) == 1


QUICK = JobSpec(**{**ONE_OFF.__dict__, "name": "quick", "start_timeout": timedelta(seconds=10)})
PATIENT = JobSpec(**{**ONE_OFF.__dict__, "name": "patient"})


def _lost_jobs(transport: FakeTransport) -> list[tuple[str, int]]:
    return [(str(o.record["job_id"]), o.record["attempt"])
            for o in outgoing(transport, "AttemptLost")]


def test_a_jobs_own_start_timeout_wins_over_the_schedulers_default() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock, start_timeout=timedelta(seconds=60))
    transport.inbox.append(create_message(QUICK, request_id="quick"))
    transport.inbox.append(create_message(PATIENT, request_id="patient"))
    owner.cycle()
    owner.cycle()  # fires both, due at T0 + 1 s
    runs = {store.jobs[r.job_id].spec.name: r for r in store.runs.values()}
    quick, patient = runs["quick"], runs["patient"]
    clock.at = T0 + timedelta(seconds=10)
    owner.cycle()
    assert not outgoing(transport, "AttemptLost")
    clock.at = T0 + timedelta(seconds=12)
    owner.cycle()
    [lost] = outgoing(transport, "AttemptLost")
    assert _lost_jobs(transport) == [(str(quick.job_id), 1)]
    assert "not started within 0:00:10" in lost.record["reason"]
    [alert] = outgoing(transport, "Alert")
    assert alert.record["kind"] == "queue_unserved"
    # The retry (dispatched at 12 s, due at 13 s) gets the job's 10 s again.
    clock.at = T0 + timedelta(seconds=24)
    owner.cycle()
    assert _lost_jobs(transport) == [(str(quick.job_id), 2)]
    assert store.runs[quick.id].status == "dead_lettered"
    assert store.runs[patient.id].status == "scheduled"
    # The job without one waits for the scheduler's 60 s.
    clock.at = T0 + timedelta(seconds=60)
    committed = len(transport.transactions)
    owner.cycle()
    assert not [o for t in transport.transactions[committed:] for o in t
                if o.name == "AttemptLost"]
    assert store.runs[patient.id].attempt == 1
    clock.at = T0 + timedelta(seconds=62)
    owner.cycle()
    assert _lost_jobs(transport) == [(str(patient.job_id), 1)]
    assert "not started within 0:01:00" in outgoing(transport, "AttemptLost")[0].record["reason"]


def test_a_new_owner_gives_dispatched_attempts_their_jobs_start_timeout() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    first = make_owner(store, transport, clock)
    transport.inbox.append(create_message(QUICK, request_id="quick"))
    transport.inbox.append(create_message(PATIENT, request_id="patient"))
    first.cycle()
    first.cycle()
    runs = {store.jobs[r.job_id].spec.name: r for r in store.runs.values()}
    second = make_owner(store, transport, clock, start_timeout=timedelta(seconds=60))
    assert len(second.start_deadlines) == 2
    due_at_12s = second.start_deadlines.overdue(T0 + timedelta(seconds=12))
    assert [d.run_id for d in due_at_12s] == [runs["quick"].id]
    assert second.start_deadlines.overdue(T0 + timedelta(seconds=60)) == due_at_12s
    assert {d.run_id for d in second.start_deadlines.overdue(T0 + timedelta(seconds=61))} == {
        runs["quick"].id, runs["patient"].id}
