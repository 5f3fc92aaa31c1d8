"""Alert channels as the owner decides them (issue 37), without servers: each command
becomes its event on the job-events topic keyed by the channel id, with the request id
taken there; refusals name their field and write nothing; another tenant's channel is as
missing as one never created; a deleted channel created again is restored at its next
secret rotation; a retry gets the first outcome."""

from __future__ import annotations

from typing import Any

from cronlog.commands.owner.ports import Outgoing
from cronlog.domain.channel import channel_id
from tests.support.clock import T0
from tests.support.owner import make_owner
from tests.support.owner_inbox import inbound
from tests.support.owner_store import ChannelStore
from tests.support.owner_world import CalendarWorld

HOOK = "https://hooks.example.com/cronlog"
CHANNEL_EVENTS = {"ChannelCreated", "ChannelUpdated", "ChannelSecretRotated", "ChannelDeleted",
                  "ChannelRestored"}


class ChannelWorld(CalendarWorld):
    store: ChannelStore

    def __init__(self) -> None:
        super().__init__()
        self.store = ChannelStore()
        self.owner = make_owner(self.store, self.transport, self.clock)

    def channel(self, command: str, request_id: str, tenant: str = "t",
                name: str = "ops", **fields: Any) -> list[Outgoing]:
        sent = len(self.transport.transactions)
        self.offset += 1
        self.send(inbound(command, {"request_id": request_id, "tenant": tenant, "name": name,
                                    "at": T0, "correlation_id": request_id, **fields},
                          self.offset))
        return [o for t in self.transport.transactions[sent:] for o in t]

    def create_channel(self, request_id: str = "c1", **fields: Any) -> list[Outgoing]:
        values = {"kind": "webhook", "target": HOOK, "recipients": [], "description": "d",
                  "is_default": False, **fields}
        return self.channel("CreateChannel", request_id, **values)


def reply(out: list[Outgoing]) -> dict[str, Any]:
    return dict(next(o.record for o in out if o.name == "CommandReply"))


def events(out: list[Outgoing]) -> list[Outgoing]:
    return [o for o in out if o.name in CHANNEL_EVENTS]


def test_a_channel_is_created_once_under_its_tenant_and_name() -> None:
    world = ChannelWorld()
    out = world.create_channel(is_default=True)
    cid = channel_id("t", "ops")
    [created] = events(out)
    assert created.name == "ChannelCreated" and created.topic == "job-events"
    assert created.key == str(cid) and str(created.record["channel_id"]) == str(cid)
    assert created.record["kind"] == "webhook" and created.record["is_default"] is True
    assert reply(out)["ok"] and reply(out)["job_version"] == 1
    assert reply(out)["job_id"] == str(cid)
    # The request id is taken on the channel's id, in the same transaction.
    applied = [o for o in out if o.name == "JobRequestApplied"]
    assert [str(o.record["job_id"]) for o in applied] == [str(cid)]
    assert "secret" not in repr(created.record).lower().replace("secret_rotation", "")
    again = world.create_channel("c2")
    assert reply(again)["error_code"] == "ALREADY_EXISTS" and not events(again)
    assert world.store.channels[cid].version == 1


def test_a_retry_gets_the_first_outcome_and_changes_nothing() -> None:
    world = ChannelWorld()
    first = reply(world.create_channel("c1"))
    retried = world.create_channel("c1")
    assert reply(retried)["ok"] and reply(retried)["job_version"] == first["job_version"]
    assert not events(retried)
    # The same request id with another body is refused, naming it.
    reused = reply(world.create_channel("c1", description="other"))
    assert not reused["ok"] and reused["error_field"] == "request_id"


def test_bad_input_is_refused_naming_the_field_and_writes_nothing() -> None:
    world = ChannelWorld()
    cases: list[tuple[dict[str, Any], str]] = [
             ({"kind": "pager"}, "channel.kind"),
             ({"target": "http://example.com/x"}, "channel.target"),
             ({"kind": "email", "target": "", "recipients": ["not-an-address"]},
              "channel.recipients"),
             ({"description": "x" * 501}, "channel.description")]
    for number, (fields, field) in enumerate(cases):
        out = world.create_channel(f"bad-{number}", **fields)
        assert reply(out)["error_code"] == "INVALID_ARGUMENT", fields
        assert reply(out)["error_field"] == field and not events(out)
    bad_name = world.channel("CreateChannel", "bad-name", name="no/slashes", kind="webhook",
                             target=HOOK)
    assert reply(bad_name)["error_field"] == "channel.name" and not events(bad_name)
    assert not world.store.channels


def test_update_rotate_and_delete_each_write_their_event_and_count_a_version() -> None:
    world = ChannelWorld()
    world.create_channel()
    cid = channel_id("t", "ops")
    stale = reply(world.channel("UpdateChannel", "u0", target=HOOK, expected_version=7))
    assert stale["error_code"] == "FAILED_PRECONDITION"
    assert stale["error_field"] == "expected_version"
    updated = world.channel("UpdateChannel", "u1", target=HOOK + "/v2", description="new",
                            is_default=True, expected_version=1)
    assert reply(updated)["job_version"] == 2
    assert [e.name for e in events(updated)] == ["ChannelUpdated"]
    rotated = world.channel("RotateChannelSecret", "r1")
    [event] = events(rotated)
    assert event.name == "ChannelSecretRotated" and event.record["secret_rotation"] == 1
    assert reply(rotated)["job_version"] == 3
    held = world.store.channels[cid]
    assert (held.target, held.is_default, held.secret_rotation) == (HOOK + "/v2", True, 1)
    # A rotation is a change: an update expecting the version before it is stale.
    assert reply(world.channel("UpdateChannel", "u2", target=HOOK,
                               expected_version=2))["error_code"] == "FAILED_PRECONDITION"
    deleted = world.channel("DeleteChannel", "d1")
    assert [e.name for e in events(deleted)] == ["ChannelDeleted"]
    assert world.store.channels[cid].deleted and not world.store.channels[cid].is_default


def test_a_deleted_channel_is_not_found_until_restored_at_its_next_rotation() -> None:
    world = ChannelWorld()
    world.create_channel()
    world.channel("DeleteChannel", "d1")
    for command, fields in (("UpdateChannel", {"target": HOOK}),
                            ("RotateChannelSecret", {}), ("DeleteChannel", {})):
        out = world.channel(command, f"after-{command}", **fields)
        assert reply(out)["error_code"] == "NOT_FOUND" and not events(out)
    bad = world.create_channel("c2", kind="email", target=HOOK)
    assert reply(bad)["error_field"] == "channel.target" and not events(bad)
    again = world.create_channel("c3", kind="email", target="", recipients=["a@b.example"])
    [restored] = events(again)
    assert restored.name == "ChannelRestored" and restored.record["secret_rotation"] == 1
    assert reply(again)["ok"] and reply(again)["job_version"] == 3
    held = world.store.channels[channel_id("t", "ops")]
    assert (held.kind, held.recipients, held.deleted, held.secret_rotation) == (
        "email", ("a@b.example",), False, 1)
    # Live again: a further create is ALREADY_EXISTS.
    assert reply(world.create_channel("c4"))["error_code"] == "ALREADY_EXISTS"


def test_another_tenants_channel_is_as_missing_as_none() -> None:
    world = ChannelWorld()
    world.create_channel()
    cid = channel_id("t", "ops")
    # Only a message the api did not write can carry another tenant with this id's key:
    # the owner still answers it as a missing channel and changes nothing.
    for command, fields in (("UpdateChannel", {"target": HOOK}),
                            ("RotateChannelSecret", {}), ("DeleteChannel", {})):
        out = world.channel(command, f"x-{command}", tenant="other", **fields)
        assert reply(out)["error_code"] == "NOT_FOUND", command
        assert "ops" in reply(out)["error_message"] and not events(out)
    assert world.store.channels[cid].version == 1
    missing = reply(world.channel("UpdateChannel", "m1", name="nothing", target=HOOK))
    assert missing["error_code"] == "NOT_FOUND"


def test_an_email_channel_holds_recipients_and_no_url() -> None:
    world = ChannelWorld()
    out = world.create_channel(kind="email", target="", recipients=["a@b.example", "c@d.example"])
    [created] = events(out)
    assert created.record["recipients"] == ["a@b.example", "c@d.example"]
    wrong = reply(world.channel("UpdateChannel", "u1", target=HOOK))
    assert wrong["error_code"] == "INVALID_ARGUMENT" and wrong["error_field"] == "channel.target"
