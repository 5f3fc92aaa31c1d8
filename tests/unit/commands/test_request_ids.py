"""Request ids per job: a retry gets the first outcome, a reuse with another request is
refused and writes nothing, and the same id on another job is another request."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from cronlog.commands.owner.ports import Outgoing
from cronlog.commands.owner.request_ids import request_digest
from cronlog.domain.ids import job_id_for_request, manual_run_id
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import record_to_event, spec_to_record
from cronlog.infra.postgres.state_writer import BatchingStateWriter
from cronlog.projections.audit import job_as_of
from cronlog.projections.state import apply_job_event
from tests.support.clock import T0, FakeClock
from tests.support.owner import make_owner
from tests.support.owner_inbox import SPEC, create_message, inbound
from tests.support.owner_store import RequestStore
from tests.support.owner_transport import FakeTransport

ONCE_A_DAY = replace(SPEC, cron="0 3 * * *", time_zone="UTC")


def owner_with_jobs(*specs: JobSpec) -> tuple[RequestStore, FakeTransport, Any, list[UUID]]:
    store, transport, clock = RequestStore(replays=True), FakeTransport(), FakeClock()
    owner = make_owner(store, transport, clock)
    for n, spec in enumerate(specs):
        transport.inbox.append(create_message(spec, request_id=f"create-{n}"))
    owner.cycle()
    return store, transport, owner, [job_id_for_request(s.tenant, f"create-{n}")
                                     for n, s in enumerate(specs)]


def command(name: str, job_id: UUID, request_id: str, **fields: Any) -> Any:
    return inbound(name, {"request_id": request_id, "job_id": str(job_id), "at": T0,
                          "correlation_id": uuid4().hex, **fields})


def last(transport: FakeTransport) -> list[Outgoing]:
    return transport.transactions[-1]


def replies(transport: FakeTransport) -> list[dict[str, Any]]:
    return [dict(o.record) for o in last(transport) if o.name == "CommandReply"]


def test_a_retry_gets_the_first_outcome_and_writes_nothing_more() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    first = command("PauseJob", job_id, "p1")
    transport.inbox.append(first)
    owner.cycle()
    assert [o.name for o in last(transport)] == ["JobPaused", "JobRequestApplied",
                                                 "CommandReply"]
    (reply,) = replies(transport)
    assert reply["ok"] and reply["job_version"] == 2
    assert reply["correlation_id"] == first.record["correlation_id"]

    retry = command("PauseJob", job_id, "p1")
    transport.inbox.append(retry)
    owner.cycle()
    assert [o.name for o in last(transport)] == ["CommandReply"]
    (again,) = replies(transport)
    assert again["ok"] and again["job_version"] == 2 and again["error_code"] is None
    assert again["correlation_id"] == retry.record["correlation_id"], "each send its reply"
    assert store.jobs[job_id].status == "paused" and store.jobs[job_id].version == 2


def test_a_retry_in_the_same_batch_is_answered_alike_and_applied_once() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    transport.inbox += [command("PauseJob", job_id, "p1"), command("PauseJob", job_id, "p1")]
    owner.cycle()
    assert [o.name for o in last(transport)].count("JobPaused") == 1
    assert [(r["ok"], r["job_version"]) for r in replies(transport)] == [(True, 2), (True, 2)]
    assert store.jobs[job_id].version == 2


def refused(transport: FakeTransport) -> dict[str, Any]:
    """The one reply of the last transaction, which holds nothing else."""
    assert [o.name for o in last(transport)] == ["CommandReply"], "a refusal writes nothing"
    (reply,) = replies(transport)
    assert not reply["ok"] and reply["error_code"] == "INVALID_ARGUMENT"
    assert reply["error_field"] == "request_id" and "request_id" in reply["error_message"]
    return reply


def test_the_same_id_for_another_command_on_the_job_is_refused() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    transport.inbox.append(command("PauseJob", job_id, "p1"))
    owner.cycle()
    transport.inbox.append(command("ResumeJob", job_id, "p1"))
    owner.cycle()
    assert "PauseJob" in refused(transport)["error_message"]
    assert store.jobs[job_id].status == "paused", "the resume was not applied"
    transport.inbox.append(command("TriggerJob", job_id, "p1"))
    owner.cycle()
    refused(transport)
    assert manual_run_id(job_id, "p1") not in store.runs


def test_the_same_id_for_another_command_in_the_same_batch_is_refused() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    transport.inbox += [command("PauseJob", job_id, "x"), command("DeleteJob", job_id, "x")]
    owner.cycle()
    first, second = replies(transport)
    assert first["ok"] and not second["ok"] and second["error_field"] == "request_id"
    assert [o.name for o in last(transport)].count("JobDeleted") == 0
    assert store.jobs[job_id].status == "paused"


def test_the_same_id_with_another_body_is_refused() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    day = datetime(2025, 12, 20, tzinfo=UTC)
    transport.inbox.append(command("BackfillJob", job_id, "b1", after=day,
                                   until=day + timedelta(days=2)))
    owner.cycle()
    assert replies(transport)[0]["ok"]
    runs = len(store.runs)
    transport.inbox.append(command("BackfillJob", job_id, "b1", after=day,
                                   until=day + timedelta(days=3)))
    owner.cycle()
    refused(transport)
    assert len(store.runs) == runs, "no run of the other interval"
    # The same interval again is the retry: its first outcome, no runs twice.
    transport.inbox.append(command("BackfillJob", job_id, "b1", after=day,
                                   until=day + timedelta(days=2)))
    owner.cycle()
    assert replies(transport)[0]["ok"] and len(store.runs) == runs

    spec = spec_to_record(replace(ONCE_A_DAY, payload=b"v2"))
    transport.inbox.append(command("UpdateJob", job_id, "u1", expected_version=0, spec=spec))
    owner.cycle()
    assert replies(transport)[0]["ok"]
    other = spec_to_record(replace(ONCE_A_DAY, payload=b"v3"))
    transport.inbox.append(command("UpdateJob", job_id, "u1", expected_version=0, spec=other))
    owner.cycle()
    refused(transport)
    assert store.jobs[job_id].spec.payload == b"v2"


def test_a_create_retried_with_another_spec_is_refused() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    transport.inbox.append(create_message(ONCE_A_DAY, request_id="create-0"))
    owner.cycle()
    assert replies(transport)[0]["ok"] and replies(transport)[0]["job_version"] == 1
    transport.inbox.append(create_message(replace(ONCE_A_DAY, payload=b"other"),
                                          request_id="create-0"))
    owner.cycle()
    refused(transport)
    assert store.jobs[job_id].spec.payload == ONCE_A_DAY.payload


def test_the_same_id_on_another_job_is_applied_on_its_own() -> None:
    other_tenant = replace(ONCE_A_DAY, tenant="other")
    store, transport, owner, (a, b) = owner_with_jobs(ONCE_A_DAY, other_tenant)
    transport.inbox.append(command("PauseJob", a, "shared"))
    owner.cycle()
    transport.inbox.append(command("PauseJob", b, "shared"))
    owner.cycle()
    (reply,) = replies(transport)
    assert reply["ok"] and reply["job_id"] == str(b) and reply["job_version"] == 2
    assert store.jobs[b].status == "paused"
    # A trigger with an id another job used creates its run.
    transport.inbox.append(command("TriggerJob", b, "create-0"))
    owner.cycle()
    assert replies(transport)[0]["ok"] and manual_run_id(b, "create-0") in store.runs


def test_two_tenants_sending_the_same_id_at_once_each_get_their_reply() -> None:
    other_tenant = replace(ONCE_A_DAY, tenant="other")
    store, transport, owner, (a, b) = owner_with_jobs(ONCE_A_DAY, other_tenant)
    sends = [command("PauseJob", a, "same"), command("PauseJob", b, "same")]
    transport.inbox += sends
    owner.cycle()
    assert [o.name for o in last(transport)].count("JobPaused") == 2
    answered = {r["correlation_id"]: r for r in replies(transport)}
    for send, job_id in zip(sends, (a, b), strict=True):
        reply = answered[send.record["correlation_id"]]
        assert reply["ok"] and reply["job_id"] == str(job_id)
    assert store.jobs[a].status == store.jobs[b].status == "paused"


def test_a_cancel_takes_its_id_on_the_job() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    transport.inbox.append(command("TriggerJob", job_id, "t1"))
    owner.cycle()
    run_id = manual_run_id(job_id, "t1")
    transport.inbox.append(command("CancelRun", job_id, "c1", run_id=str(run_id)))
    owner.cycle()
    assert "JobRequestApplied" in [o.name for o in last(transport)]
    assert store.runs[run_id].status == "cancelled"
    transport.inbox.append(command("PauseJob", job_id, "c1"))
    owner.cycle()
    assert "CancelRun" in refused(transport)["error_message"]
    assert store.jobs[job_id].status == "active"


def test_ids_taken_before_digests_were_kept_answer_as_retries() -> None:
    store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    store.taken[(job_id, "old")] = {"command": None, "request_digest": None,
                                    "job_version": 7}
    transport.inbox.append(command("PauseJob", job_id, "old"))
    owner.cycle()
    (reply,) = replies(transport)
    assert reply["ok"] and reply["job_version"] == 7
    assert store.jobs[job_id].status == "active"


def test_the_digest_is_of_what_the_command_asks_not_when_or_by_which_send() -> None:
    spec = spec_to_record(ONCE_A_DAY)
    base = {"request_id": "r", "job_id": str(uuid4()), "at": T0, "correlation_id": "a",
            "spec": spec, "expected_version": 0}
    moved = {**base, "at": T0 + timedelta(hours=1), "correlation_id": "b",
             "job_id": str(uuid4())}
    assert request_digest("UpdateJob", base) == request_digest("UpdateJob", moved)
    assert request_digest("UpdateJob", base) != request_digest("CreateJob", base)
    assert request_digest("UpdateJob", base) != request_digest(
        "UpdateJob", {**base, "expected_version": 3})
    assert request_digest("UpdateJob", base) != request_digest(
        "UpdateJob", {**base, "spec": {**spec, "payload": b"other"}})
    # The same instant in another zone (as Avro reads it back, in UTC) is the same request.
    local = datetime(2026, 1, 1, 13, tzinfo=UTC).astimezone()
    assert request_digest("BackfillJob", {"after": local, "until": local}) == request_digest(
        "BackfillJob", {"after": local.astimezone(UTC), "until": local.astimezone(UTC)})


def test_the_projection_keeps_the_first_digest_and_a_bare_id_never_overrides_it() -> None:
    writer, job_id = BatchingStateWriter(), uuid4()
    applied = {"job_id": job_id, "version": 2, "at": T0, "request_id": "p",
               "command": "PauseJob", "request_digest": "d1"}
    apply_job_event(writer, 0, "JobPaused", {"job_id": job_id, "version": 2, "at": T0,
                                             "request_id": "p"}, b"")
    apply_job_event(writer, 0, "JobRequestApplied", applied, b"")
    apply_job_event(writer, 0, "JobRequestApplied", {**applied, "request_digest": "d2"}, b"")
    apply_job_event(writer, 0, "JobPaused", {"job_id": job_id, "version": 2, "at": T0,
                                             "request_id": "p"}, b"")
    assert writer.requests[(job_id, "p")]["request_digest"] == "d1"
    assert writer.requests[(job_id, "p")]["command"] == "PauseJob"
    assert writer.job_updates == {job_id: {"status": "paused", "revision": 2, "version": 2,
                                          "updated_at": T0}}


def test_the_audit_replays_a_job_through_its_request_records() -> None:
    _store, transport, owner, (job_id,) = owner_with_jobs(ONCE_A_DAY)
    transport.inbox.append(command("PauseJob", job_id, "p1"))
    owner.cycle()
    events = [(o.name, dict(o.record)) for t in transport.transactions for o in t
              if o.topic == "job-events"]
    assert "JobRequestApplied" in [n for n, _ in events]
    job = job_as_of(events, T0 + timedelta(days=1), record_to_event)
    assert job is not None and job.status == "paused" and job.version == 2


def test_a_null_field_a_newer_schema_adds_does_not_change_the_digest() -> None:
    from cronlog.commands.owner.request_ids import request_digest

    old = {"job_id": "j", "spec": {"name": "n", "timeout_ms": 1000}}
    new = {"job_id": "j", "spec": {"name": "n", "timeout_ms": 1000, "start_timeout_ms": None}}
    set_ = {"job_id": "j", "spec": {"name": "n", "timeout_ms": 1000, "start_timeout_ms": 5}}
    assert request_digest("CreateJob", old) == request_digest("CreateJob", new)
    assert request_digest("CreateJob", old) != request_digest("CreateJob", set_)


def test_a_digest_stays_what_earlier_releases_stored() -> None:
    """Digests are kept in Postgres and on the log (JobRequestApplied): a retry after an
    upgrade is judged against one an older owner took, so the same request must digest the
    same. These were taken with the digest as it was on 6 December 2026."""
    spec = spec_to_record(replace(SPEC, cron="0 3 * * *", time_zone="Europe/Berlin",
                                  labels={"team": "ops", "tier": "1"}, payload=b"\x00\xff{}"))
    body = {"request_id": "r", "job_id": "0b6f0ab0-0000-4000-8000-000000000001",
            "spec": spec, "expected_version": 0,
            "after": datetime(2026, 3, 29, 1, 30, tzinfo=UTC), "until": datetime(2026, 3, 30),
            "run_id": UUID(int=5)}
    assert request_digest("CreateJob", body) == \
        "4795886c9072566b7fdb6dd219c3139c2d3e3c655cf8934e30325f71b6d1cf31"
    assert request_digest("UpdateJob", body) == \
        "eeebe93ebed3f38e5e3e7dcbea60eb3db79730181ffb3ff6f8b7c7f2e9a11571"
    assert request_digest("BackfillJob", body) == \
        "977ffb6397dcae083b41cd1b83aba09361ff054bc2b75f459978496bdb35371b"
