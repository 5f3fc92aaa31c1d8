"""ChannelApi (issue 37): bad input names its field and sends nothing; commands are keyed
by the channel's (tenant, name) id and encode in the owner's schemas; a webhook's secret is
derived from the operator's key, in the answers to create and rotation only; without a key
a webhook channel is FAILED_PRECONDITION naming the setting; the tenant's count is
bounded; reads never cross tenants. And the key's setting, read at start with a bound."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronlog.commands.api.channel_api import ChannelApi, SigningKeyMissing
from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.ports import ChannelView
from cronlog.commands.messages import CommandMessage
from cronlog.domain.catalogue import Command
from cronlog.domain.channel import Channel, ChannelLimitReached, ChannelNotFound, channel_id
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.config import ConfigError
from cronlog.infra.config_env import settings_from_env
from cronlog.notifications.signing import derive_channel_secret, sign
from cronlog_dev.processes import settings_env
from tests.support.api_ports import NOW
from tests.support.clock import FakeClock

KEY = bytes(range(32))
HOOK = "https://hooks.example.com/cronlog"


@dataclass
class Channels:
    """The channels table, applying what the owner would for each command sent."""

    rows: dict[tuple[str, str], ChannelView] = field(default_factory=dict)

    def channel(self, tenant: str, name: str) -> ChannelView | None:
        return self.rows.get((tenant, name))

    def channels(self, tenant: str, page_size: int,
                 page_token: str | None) -> tuple[list[ChannelView], str | None]:
        live = sorted((v for (t, _), v in self.rows.items() if t == tenant and not v.deleted),
                      key=lambda v: v.name)
        return live[:page_size], None

    def count_channels(self, tenant: str) -> int:
        return sum(1 for (t, _), v in self.rows.items() if t == tenant and not v.deleted)

    def apply(self, name: str, r: Mapping[str, Any]) -> int | None:
        """The version after the command; None when the owner answers NOT_FOUND."""
        key = (r["tenant"], r["name"])
        held = self.rows.get(key)
        if name != Command.CREATE_CHANNEL and (held is None or held.deleted):
            return None
        if name == Command.CREATE_CHANNEL and held is not None:
            # A deleted channel restored at its next rotation.
            self.rows[key] = dataclasses.replace(
                held, kind=r["kind"], target=r["target"], recipients=tuple(r["recipients"]),
                description=r["description"], is_default=r["is_default"], deleted=False,
                secret_rotation=held.secret_rotation + 1, version=held.version + 1)
        elif name == Command.CREATE_CHANNEL:
            self.rows[key] = ChannelView(
                tenant=r["tenant"], name=r["name"], channel_id=channel_id(*key),
                kind=r["kind"], target=r["target"], recipients=tuple(r["recipients"]),
                description=r["description"], is_default=r["is_default"], secret_rotation=0,
                version=1, deleted=False, created_at=NOW, updated_at=NOW)
        elif held is not None:
            changes: dict[str, Any] = {"version": held.version + 1}
            if name == Command.UPDATE_CHANNEL:
                changes.update(target=r["target"], recipients=tuple(r["recipients"]),
                               description=r["description"], is_default=r["is_default"])
            elif name == Command.ROTATE_CHANNEL_SECRET:
                changes["secret_rotation"] = held.secret_rotation + 1
            else:
                changes.update(deleted=True, is_default=False)
            self.rows[key] = dataclasses.replace(held, **changes)
        return self.rows[key].version


@dataclass
class OwnerBus:
    table: Channels
    sent: list[tuple[str, str, Mapping[str, Any]]] = field(default_factory=list)

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        record = command.record()
        self.sent.append((command.key, command.NAME, record))
        version = self.table.apply(command.NAME, record)
        if version is None:
            return {"ok": False, "error_code": "NOT_FOUND", "error_field": "name",
                    "error_message": f"channel {record['name']!r} not found"}
        return {"ok": True, "job_version": version}


def api(key: bytes = KEY, **options: Any) -> tuple[ChannelApi, OwnerBus]:
    table = Channels()
    bus = OwnerBus(table)
    return ChannelApi(bus=bus, channels=table, clock=FakeClock(NOW), signing_key=key,
                      read_your_write_timeout=0, **options), bus


def test_create_is_keyed_by_the_channel_id_encodes_and_returns_the_secret_once() -> None:
    channels, bus = api()
    answer = channels.create("r-1", "acme", "ops", "webhook", HOOK, [], "on call", True)
    [(key, name, record)] = bus.sent
    assert key == str(channel_id("acme", "ops")) and name == "CreateChannel"
    codec = AvroCodec()
    decoded_name, decoded = codec.decode(codec.encode(name, record))
    assert decoded_name == name and decoded["target"] == HOOK and decoded["is_default"]
    assert "secret" not in record
    expected = derive_channel_secret(KEY, channel_id("acme", "ops"), 0)
    assert answer.secret == expected and answer.secret.startswith("whsec_")
    # The published library verifies what the notifier signs with it.
    headers = sign(answer.secret, "msg_1", int(time.time()), b"{}")
    assert Webhook(answer.secret).verify(b"{}", headers) == {}
    # Get and list show the channel, never the secret.
    assert channels.get("acme", "ops").secret_rotation == 0
    assert [v.name for v in channels.list("acme", 100, None)[0]] == ["ops"]


def test_rotation_gives_a_new_secret_and_the_old_one_no_longer_verifies() -> None:
    channels, _ = api()
    first = channels.create("r-1", "acme", "ops", "webhook", HOOK, [], "", False).secret
    rotated = channels.rotate_secret("r-2", "acme", "ops")
    assert rotated.channel.secret_rotation == 1 and rotated.secret not in ("", first)
    assert rotated.secret == derive_channel_secret(KEY, channel_id("acme", "ops"), 1)
    headers = sign(rotated.secret, "msg_1", int(time.time()), b"{}")
    assert Webhook(rotated.secret).verify(b"{}", headers) == {}
    with pytest.raises(WebhookVerificationError):
        Webhook(first).verify(b"{}", headers)


def test_slack_and_email_channels_have_no_secret_and_need_no_key() -> None:
    channels, _ = api(key=b"")
    slack = channels.create("r-1", "acme", "chat", "slack",
                            "https://hooks.slack.com/services/T/B/X", [], "", False)
    mail = channels.create("r-2", "acme", "mail", "email", "", ["a@b.example"], "", False)
    assert (slack.secret, mail.secret) == ("", "")
    assert channels.rotate_secret("r-3", "acme", "mail").secret == ""


def test_without_a_key_a_webhook_channel_is_refused_naming_the_setting() -> None:
    channels, bus = api(key=b"")
    with pytest.raises(SigningKeyMissing, match="CRONLOG_ALERT_SIGNING_KEY_FILE") as caught:
        channels.create("r-1", "acme", "ops", "webhook", HOOK, [], "", False)
    assert caught.value.status == "FAILED_PRECONDITION" and not bus.sent


@pytest.mark.parametrize(("args", "field_name"), [
    (("", "acme", "ops", "webhook", HOOK, [], "", False), "request_id"),
    (("r", "", "ops", "webhook", HOOK, [], "", False), "tenant"),
    (("r", "acme", "a/b", "webhook", HOOK, [], "", False), "name"),
    (("r", "acme", "ops", "pager", HOOK, [], "", False), "kind"),
    (("r", "acme", "ops", "webhook", "ftp://x.example/", [], "", False), "target"),
    (("r", "acme", "ops", "webhook", HOOK, ["a@b.example"], "", False), "recipients"),
    (("r", "acme", "ops", "email", "", ["x"] * 11, "", False), "recipients"),
    (("r", "acme", "ops", "email", "", ["nope"], "", False), "recipients"),
    (("r", "acme", "ops", "webhook", HOOK, [], "d" * 501, False), "description"),
])
def test_bad_input_names_its_field_and_sends_nothing(args: tuple[Any, ...],
                                                      field_name: str) -> None:
    channels, bus = api()
    with pytest.raises(InvalidSpec) as caught:
        channels.create(*args)
    assert caught.value.field == field_name and not bus.sent


def test_the_tenants_count_is_bounded_and_a_deleted_channel_frees_a_place() -> None:
    channels, bus = api(max_per_tenant=2)
    channels.create("r-1", "acme", "a", "webhook", HOOK, [], "", False)
    channels.create("r-2", "acme", "b", "webhook", HOOK, [], "", False)
    with pytest.raises(ChannelLimitReached) as caught:
        channels.create("r-3", "acme", "c", "webhook", HOOK, [], "", False)
    assert caught.value.status == "RESOURCE_EXHAUSTED" and len(bus.sent) == 2
    # Another tenant has its own count.
    channels.create("r-4", "other", "c", "webhook", HOOK, [], "", False)
    channels.delete("r-5", "acme", "a")
    channels.create("r-6", "acme", "c", "webhook", HOOK, [], "", False)


def test_reads_and_changes_never_reach_another_tenants_channel() -> None:
    channels, bus = api()
    channels.create("r-1", "acme", "ops", "webhook", HOOK, [], "", False)
    sent = len(bus.sent)
    for attempt in (lambda: channels.get("other", "ops"),
                    lambda: channels.update("r-2", "other", "ops", HOOK, [], "", False, 0),
                    lambda: channels.rotate_secret("r-3", "other", "ops")):
        with pytest.raises(ChannelNotFound, match="'ops' not found"):
            attempt()
    assert len(bus.sent) == sent and channels.list("other", 100, None) == ([], None)
    # A delete is the owner's to refuse (so that a retried delete gets its first outcome):
    # its command names the other tenant's own id, which holds nothing.
    with pytest.raises(CommandRejected, match="'ops' not found") as refused:
        channels.delete("r-4", "other", "ops")
    assert refused.value.status == "NOT_FOUND"
    assert bus.sent[-1][0] == str(channel_id("other", "ops"))
    assert channels.get("acme", "ops").version == 1


def test_a_deleted_channel_is_not_found_and_update_keeps_its_kind() -> None:
    channels, _ = api()
    channels.create("r-1", "acme", "mail", "email", "", ["a@b.example"], "", False)
    with pytest.raises(InvalidSpec) as caught:
        channels.update("r-2", "acme", "mail", HOOK, [], "", False, 0)
    assert caught.value.field == "target"
    updated = channels.update("r-3", "acme", "mail", "", ["c@d.example"], "new", True, 1)
    assert updated.channel.recipients == ("c@d.example",) and updated.channel.version == 2
    channels.delete("r-4", "acme", "mail")
    with pytest.raises(ChannelNotFound):
        channels.get("acme", "mail")


def test_a_deleted_channel_created_again_has_a_secret_it_never_had() -> None:
    channels, _ = api(max_per_tenant=1)
    first = channels.create("r-1", "acme", "ops", "webhook", HOOK, [], "", False).secret
    channels.delete("r-2", "acme", "ops")
    again = channels.create("r-3", "acme", "ops", "webhook", HOOK, [], "", False)
    assert again.channel.secret_rotation == 1 and not again.channel.deleted
    assert again.secret not in ("", first)


def test_the_signing_key_file_is_read_at_start_bounded_and_passed_as_a_file(
        tmp_path: Path) -> None:
    assert settings_from_env({}).alert_signing_key == b""
    path = tmp_path / "key"
    path.write_bytes(KEY)
    settings = settings_from_env({"CRONLOG_ALERT_SIGNING_KEY_FILE": str(path)})
    assert settings.alert_signing_key == KEY and KEY.hex() not in repr(settings)
    assert str(KEY) not in repr(settings)
    env = settings_env(settings)
    assert env["CRONLOG_ALERT_SIGNING_KEY_FILE"] == str(path)
    assert settings_from_env(env).alert_signing_key == KEY
    path.write_bytes(b"short")
    with pytest.raises(ConfigError, match=r"CRONLOG_ALERT_SIGNING_KEY_FILE .*: 5 bytes"):
        settings_from_env({"CRONLOG_ALERT_SIGNING_KEY_FILE": str(path)})
    path.write_bytes(b"k" * 5000)
    with pytest.raises(ConfigError, match="more than 4096 bytes"):
        settings_from_env({"CRONLOG_ALERT_SIGNING_KEY_FILE": str(path)})
    with pytest.raises(ConfigError, match="cannot read"):
        settings_from_env({"CRONLOG_ALERT_SIGNING_KEY_FILE": str(tmp_path / "none")})


@given(kind=st.sampled_from(["webhook", "slack", "email", "", "x"]),
       target=st.one_of(st.sampled_from([HOOK, "", "http://127.0.0.1:9/x",
                                         "https://hooks.slack.com/services/x"]),
                        st.text(max_size=40)),
       recipients=st.lists(st.one_of(st.sampled_from(["a@b.example", "A@B.example"]),
                                     st.text(max_size=20)), max_size=12),
       name=st.one_of(st.just("ops"), st.text(max_size=12)),
       description=st.text(max_size=20))
@settings(max_examples=200, deadline=None)
def test_any_create_is_sent_valid_or_refused_naming_a_field_and_sending_nothing(
        kind: str, target: str, recipients: list[str], name: str, description: str) -> None:
    channels, bus = api()
    try:
        answer = channels.create("r-1", "acme", name, kind, target, recipients, description,
                                 False)
    except InvalidSpec as refused:
        assert refused.field in ("name", "kind", "target", "recipients", "description")
        assert not bus.sent
        return
    [(_, _, record)] = bus.sent
    # What the api let through, the owner's domain accepts too.
    Channel.create("acme", record["name"], record["kind"], record["target"],
                   record["recipients"], record["description"], False, "r-1", NOW)
    assert answer.channel.kind == kind
