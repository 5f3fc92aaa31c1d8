"""One bad message (or job) fails only itself: the owner sets it aside and goes on."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.job import Job
from cronlog.infra.avro.event_mapping import AvroEventRecords
from cronlog.ports import UNREADABLE, InboundMessage
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import SPEC, create_message, inbound
from tests.support.owner_store import FakeStore
from tests.support.owner_transport import FakeTransport


def names(transaction: list[Outgoing]) -> list[str]:
    return [o.name for o in transaction]


def by_name(transaction: list[Outgoing], name: str) -> list[Outgoing]:
    return [o for o in transaction if o.name == name]


def setup() -> tuple[FakeStore, FakeTransport, FakeClock, Any]:
    store, transport, clock = FakeStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    return store, transport, clock, owner


def test_a_command_that_raises_is_set_aside_and_the_rest_of_the_cycle_commits() -> None:
    store, transport, _clock, owner = setup()
    bad = inbound("PauseJob", {"request_id": "bad", "job_id": "not-a-uuid", "at": T0}, 1)
    transport.inbox += [create_message(SPEC, "first"), bad, create_message(SPEC, "other")]
    owner.cycle()
    [tx] = transport.transactions
    created = by_name(tx, "JobCreated")
    assert len(created) == 2, names(tx)
    [poison] = by_name(tx, "PoisonMessage")
    assert poison.topic == "poison" and poison.record["message_name"] == "PauseJob"
    assert poison.record["offset"] == 1 and "ValueError" in poison.record["error"]
    replies = {o.record["request_id"]: o.record for o in by_name(tx, "CommandReply")}
    assert replies["first"]["ok"] and replies["other"]["ok"]
    assert replies["bad"]["ok"] is False and replies["bad"]["error_code"] == "INTERNAL"
    assert "set it aside" in replies["bad"]["error_message"]
    # Nothing of the bad command reached the state store; the good ones did.
    assert len(store.jobs) == 2


def test_an_unreadable_message_is_set_aside_with_its_bytes() -> None:
    _store, transport, _clock, owner = setup()
    unreadable = InboundMessage("inbox", 0, 7, UNREADABLE,
                                {"error": "MalformedMessage: no marker"}, b"\x00garbage")
    transport.inbox += [unreadable, create_message(SPEC)]
    owner.cycle()
    [tx] = transport.transactions
    [poison] = by_name(tx, "PoisonMessage")
    assert poison.record["body"] == b"\x00garbage" and poison.record["job_id"] is None
    assert "no marker" in poison.record["error"]
    assert by_name(tx, "JobCreated") and not by_name(tx, "Alert")


def test_a_report_missing_fields_is_set_aside_and_its_alert_names_the_job_tenant() -> None:
    store, transport, clock, owner = setup()
    transport.inbox.append(create_message(SPEC))
    owner.cycle()
    job_id = next(iter(store.jobs))
    clock.at = T0 + timedelta(seconds=10)
    owner.cycle()
    run_id = by_name(transport.transactions[-1], "RunScheduled")[0].record["run_id"]
    # Schema-valid reports always have an outcome; this one does not.
    transport.inbox.append(inbound("AttemptFinishedReport", {
        "run_id": str(run_id), "job_id": str(job_id), "attempt": 1}, 2))
    owner.cycle()
    tx = transport.transactions[-1]
    [poison] = by_name(tx, "PoisonMessage")
    assert poison.record["tenant"] == SPEC.tenant
    [alert] = [a for a in by_name(tx, "Alert") if a.record["kind"] == "message_set_aside"]
    assert alert.record["tenant"] == SPEC.tenant and alert.record["job_id"] == str(job_id)


def test_a_due_job_that_cannot_fire_is_set_aside_and_the_others_fire(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _store, transport, clock, owner = setup()
    transport.inbox += [create_message(SPEC, "broken"), create_message(SPEC, "healthy")]
    owner.cycle()
    broken = job_id_for_request(SPEC.tenant, "broken")
    healthy = job_id_for_request(SPEC.tenant, "healthy")
    real_fire_due = Job.fire_due

    def fire_due(self: Job, *args: Any, **kwargs: Any) -> Any:
        if self.id == broken:
            raise OverflowError("date value out of range")
        return real_fire_due(self, *args, **kwargs)

    monkeypatch.setattr(Job, "fire_due", fire_due)
    clock.at = T0 + timedelta(seconds=10)
    owner.cycle()
    tx = transport.transactions[-1]
    fired = {UUID(str(o.record["job_id"])) for o in by_name(tx, "RunScheduled")}
    assert fired == {healthy}
    [alert] = [a for a in by_name(tx, "Alert") if a.record["kind"] == "job_set_aside"]
    assert alert.record["job_id"] == str(broken) and "OverflowError" in alert.record["message"]
    assert set(owner.set_aside_jobs) == {broken}
    # Later cycles skip it without raising again, and alert only once.
    clock.at += timedelta(seconds=10)
    owner.cycle()
    assert not [a for a in by_name(transport.transactions[-1], "Alert")
                if a.record["kind"] == "job_set_aside"]
    # A command on the job gives it another chance.
    monkeypatch.setattr(Job, "fire_due", real_fire_due)
    transport.inbox.append(inbound("PauseJob", {"request_id": "p", "job_id": str(broken),
                                                "at": clock.at}))
    owner.cycle()
    assert broken not in owner.set_aside_jobs


class FailingRecords(AvroEventRecords):
    """Cannot encode the JobPaused events of one job."""

    def __init__(self, job_id: UUID) -> None:
        super().__init__()
        self.job_id = job_id

    def to_record(self, event: object) -> tuple[str, dict[str, Any]]:
        name, record = super().to_record(event)
        if name == "JobPaused" and str(record["job_id"]) == str(self.job_id):
            raise TypeError("cannot encode")
        return name, record


def test_a_command_whose_events_cannot_be_written_is_found_among_its_jobs_messages() -> None:
    store, transport, clock, owner = setup()
    transport.inbox += [create_message(SPEC, "a")]
    owner.cycle()
    job_id = job_id_for_request(SPEC.tenant, "a")
    owner._outbox._records = FailingRecords(job_id)  # what encodes the cycle's events
    clock.at = T0 + timedelta(seconds=10)
    # Its own cancel-less command before and after the bad one: only the bad one goes.
    transport.inbox += [
        inbound("TriggerJob", {"request_id": "t1", "job_id": str(job_id), "at": clock.at}, 5),
        inbound("PauseJob", {"request_id": "p1", "job_id": str(job_id), "at": clock.at}, 6),
        inbound("TriggerJob", {"request_id": "t2", "job_id": str(job_id), "at": clock.at}, 7),
    ]
    owner.cycle()
    tx = transport.transactions[-1]
    [poison] = by_name(tx, "PoisonMessage")
    assert poison.record["offset"] == 6 and "TypeError" in poison.record["error"]
    replies = {o.record["request_id"]: o.record["ok"] for o in by_name(tx, "CommandReply")}
    assert replies == {"t1": True, "p1": False, "t2": True}
    assert job_id not in owner.set_aside_jobs
    assert store.jobs[job_id].status == "active"
