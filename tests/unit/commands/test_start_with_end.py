"""A short run's start reported with its end (WorkerReports v2: a finished report with
started_at): the owner records one AttemptSucceeded that stands for the AttemptStarted too,
raises what the start would have raised, and a new owner replays it as a succeeded run."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from cronlog.commands.owner.alerts import run_event_alerts
from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import Topics
from cronlog.domain.catalogue import Report, RunEvent
from cronlog.domain.job import Job
from cronlog.domain.notify_rule import notify_rule
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import create_message, report
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport, outgoing

MINUTELY = JobSpec(name="n", tenant="t", queue="q1", handler="echo", cron="30 * * * * *")
S = timedelta(seconds=1)


def dispatched() -> tuple[FakeStore, FakeTransport, FakeClock, PartitionOwner, Run]:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(MINUTELY))
    owner.cycle()
    clock.at = T0 + 29 * S
    owner.cycle()
    (run,) = store.runs.values()
    return store, transport, clock, owner, run


def finished(run: Run, outcome: str = "succeeded", **fields: Any) -> Any:
    return report(Report.ATTEMPT_FINISHED, run, finished_at=T0 + 31 * S, outcome=outcome,
                  output=b"ok", output_truncated=False,
                  error=None if outcome == "succeeded" else "Boom: no", **fields)


def run_events(transport: FakeTransport) -> list[str]:
    return [o.name for tx in transport.transactions for o in tx
            if o.name.startswith("Attempt")]


def test_a_finish_that_carries_its_start_is_one_event_and_a_succeeded_run() -> None:
    store, transport, clock, owner, run = dispatched()
    clock.at = T0 + 31 * S
    transport.inbox.append(finished(run, started_at=T0 + 30 * S))
    owner.cycle()
    assert run_events(transport) == [RunEvent.ATTEMPT_SUCCEEDED]
    [event] = outgoing(transport, RunEvent.ATTEMPT_SUCCEEDED)
    assert event.record["started_at"] == T0 + 30 * S
    assert store.runs[run.id].status == "succeeded"
    assert not owner._attempts.deadlines, "no heartbeat is awaited for it"
    # A new owner replays the log's event into the same run.
    again = make_owner(store, transport, clock)
    again.cycle()
    assert store.runs[run.id].status == "succeeded"


def test_a_finish_whose_start_was_recorded_already_is_only_the_end() -> None:
    _, transport, clock, owner, run = dispatched()
    clock.at = T0 + 30 * S
    transport.inbox.append(report(Report.ATTEMPT_STARTED, run, started_at=T0 + 30 * S))
    owner.cycle()
    clock.at = T0 + 31 * S
    # A worker that sent the start and then, redelivering, the end with it.
    transport.inbox.append(finished(run, started_at=T0 + 30 * S))
    owner.cycle()
    assert run_events(transport) == [RunEvent.ATTEMPT_STARTED, RunEvent.ATTEMPT_SUCCEEDED]
    [event] = outgoing(transport, RunEvent.ATTEMPT_SUCCEEDED)
    assert event.record["started_at"] is None


def test_a_failure_that_carries_its_start_records_the_start_then_the_failure() -> None:
    _, transport, clock, owner, run = dispatched()
    clock.at = T0 + 31 * S
    transport.inbox.append(finished(run, outcome="failed", started_at=T0 + 30 * S))
    owner.cycle()
    assert run_events(transport)[:2] == [RunEvent.ATTEMPT_STARTED, RunEvent.ATTEMPT_FAILED]
    [started] = outgoing(transport, RunEvent.ATTEMPT_STARTED)
    assert started.record["started_at"] == T0 + 30 * S


def test_a_late_start_carried_by_the_end_is_alerted_as_a_late_start() -> None:
    spec = JobSpec(name="nightly", tenant="acme", queue="default", handler="echo",
                   cron="0 2 * * *", notify=notify_rule(["ops"], ["started_late", "recovered"],
                                                        timedelta(minutes=2)))
    job = Job.create(job_id=UUID(int=7), spec=spec, request_id="r", at=T0 - S)
    run = Run.schedule(job, T0, "schedule", T0)
    topics = Topics("job-events", "run-events", "replies", lambda q: f"dispatch.{q}")
    record = {"at": T0 + 200 * S, "attempt": 1, "started_at": T0 + 150 * S}
    raised = run_event_alerts(topics, run, RunEvent.ATTEMPT_SUCCEEDED, record, job)
    assert [o.record["kind"] for o in raised] == ["run_started_late", "run_succeeded"]
    on_time = {**record, "started_at": T0 + 10 * S}
    assert [o.record["kind"] for o in run_event_alerts(
        topics, run, RunEvent.ATTEMPT_SUCCEEDED, on_time, job)] == ["run_succeeded"]
