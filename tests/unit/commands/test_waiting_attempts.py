"""Attempts due later than the lookahead wait in the scheduler, not at a worker: a worker
crash then re-runs only what it started within the last lookahead (issue 13, item 11)."""

from __future__ import annotations

from datetime import timedelta

from cronlog.commands.owner.partition_owner import PartitionOwner
from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import create_message, inbound, report
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport, outgoing

BACKOFF = RetryPolicy(max_attempts=3, initial_backoff=timedelta(minutes=10),
                      max_backoff=timedelta(minutes=10), jitter=0.0)
MINUTELY = JobSpec(name="n", tenant="t", queue="q1", handler="echo", cron="30 * * * * *",
                   retry_policy=BACKOFF)


def failed_once(spec: JobSpec = MINUTELY
                ) -> tuple[FakeStore, FakeTransport, FakeClock, PartitionOwner, Run]:
    """A job firing at second 30 of each minute whose first run failed once."""
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(spec))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=29)
    owner.cycle()
    (run,) = store.runs.values()
    clock.at = T0 + timedelta(seconds=30)
    transport.inbox.append(report("AttemptStartedReport", run, started_at=clock.at))
    transport.inbox.append(report("AttemptFinishedReport", run, finished_at=clock.at,
                                  outcome="failed", output=b"", output_truncated=False,
                                  error="Boom: no"))
    owner.cycle()
    return store, transport, clock, owner, run


def retries_of(transport: FakeTransport, run: Run) -> list[Outgoing]:
    """The dispatches of the run's second attempt."""
    return [o for tx in transport.transactions for o in tx
            if o.name == "Dispatch" and o.record["attempt"] == 2
            and o.record["run_id"] == str(run.id)]


def test_a_retry_due_after_the_lookahead_waits_and_is_dispatched_when_due() -> None:
    store, transport, clock, owner, run = failed_once()
    assert [o.name for o in outgoing(transport, "AttemptWaiting")] == ["AttemptWaiting"]
    assert not outgoing(transport, "Dispatch"), "no dispatch for a worker to hold 10 minutes"
    assert store.runs[run.id].attempt_status == "waiting"
    clock.at = T0 + timedelta(seconds=30 + 590)
    owner.cycle()
    assert not retries_of(transport, run)
    clock.at = T0 + timedelta(seconds=30 + 599)
    owner.cycle()
    [dispatch] = retries_of(transport, run)
    assert dispatch.record["attempt"] == 2
    assert dispatch.record["not_before"] == T0 + timedelta(seconds=30 + 600)
    assert store.runs[run.id].attempt_status == "dispatched"


def test_a_new_owner_dispatches_the_attempts_that_wait() -> None:
    store, transport, clock, _, run = failed_once()
    second = make_owner(store, transport, clock)
    clock.at = T0 + timedelta(seconds=30 + 599)
    second.cycle()
    [dispatch] = retries_of(transport, run)
    assert dispatch.record["attempt"] == 2


def test_pausing_cancels_a_waiting_retry_without_telling_any_worker_to_run_it() -> None:
    store, transport, clock, owner, run = failed_once()
    transport.inbox.append(inbound("PauseJob", {
        "request_id": "p", "job_id": str(run.job_id), "at": clock.at}))
    owner.cycle()
    assert [o.record["attempt"] for o in outgoing(transport, "AttemptCancelled")] == [2]
    assert store.runs[run.id].status == "cancelled"
    clock.at = T0 + timedelta(minutes=11)
    owner.cycle()
    assert not retries_of(transport, run)


SPREAD = JobSpec(name="n", tenant="t", queue="q1", handler="echo", cron="30 * * * * *",
                 spread=timedelta(minutes=30))


def test_a_run_spread_past_the_lookahead_waits_for_its_start() -> None:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    transport.inbox.append(create_message(SPREAD))
    owner.cycle()
    clock.at = T0 + timedelta(seconds=29)
    owner.cycle()
    (run,) = store.runs.values()
    assert run.attempt_status == "waiting" and not outgoing(transport, "Dispatch")
    offset = run.not_before - (T0 + timedelta(seconds=30))
    assert timedelta(0) < offset <= timedelta(minutes=30)
    clock.at = run.not_before - timedelta(seconds=1)
    owner.cycle()
    dispatches = [o for tx in transport.transactions for o in tx if o.name == "Dispatch"]
    assert [d.record["not_before"] for d in dispatches] == [run.not_before]


QUICK_RETRY = JobSpec(name="n", tenant="t", queue="q1", handler="echo", cron="30 * * * * *",
                      retry_policy=RetryPolicy(max_attempts=2,
                                               initial_backoff=timedelta(seconds=1),
                                               max_backoff=timedelta(seconds=1), jitter=0.0))


def test_pause_cancels_a_run_whose_retry_is_dispatched_but_not_started() -> None:
    store, transport, clock, owner, run = failed_once(QUICK_RETRY)
    assert store.runs[run.id].attempt == 2 and store.runs[run.id].attempt_status == "dispatched"
    transport.inbox.append(inbound("PauseJob", {"request_id": "p", "job_id": str(run.job_id),
                                                "at": clock.at}))
    owner.cycle()
    cancelled = outgoing(transport, "AttemptCancelled")
    assert [o.record["attempt"] for o in cancelled] == [2]
    assert [o.record["attempt"] for o in outgoing(transport, "CancelAttempt")] == [2]
    assert store.runs[run.id].status == "cancelled"
