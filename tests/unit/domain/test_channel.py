"""The Channel aggregate (issue 37): its ids, the shapes of its targets, each refusal
naming its field, versions, secret rotations and deletion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import pytest

from cronlog.domain.catalogue import ChannelEvent
from cronlog.domain.channel import (
    MAX_CHANNELS_PER_TENANT,
    MAX_RECIPIENTS,
    Channel,
    ChannelExists,
    ChannelKind,
    ChannelLimitReached,
    ChannelNotFound,
    channel_id,
    check_channel_count,
)
from cronlog.domain.errors import InvalidSpec, StaleVersion
from cronlog.domain.exclusions import calendar_id
from cronlog.domain.limits import TenantLimitReached

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
HOOK = "https://hooks.example.com/cronlog"
SLACK = "https://hooks.slack.com/services/T000/B000/XXXX"
LONGEST = HOOK + "/" + "p" * (2048 - len(HOOK) - 1)


def webhook(target: str = HOOK, name: str = "oncall") -> Channel:
    return Channel.create("t", name, "webhook", target, (), "", False, "r1", NOW)


def names(channel: Channel) -> list[str]:
    return [type(e).__name__ for e in channel.collect_events()]


def refused_field(create: Callable[[], object]) -> str:
    with pytest.raises(InvalidSpec) as refused:
        create()
    return refused.value.field


def test_a_channel_id_derives_from_tenant_and_name_and_is_never_a_calendars() -> None:
    assert channel_id("t", "oncall") == channel_id("t", "oncall") == webhook().id
    assert channel_id("t", "oncall") != channel_id("u", "oncall")
    assert channel_id("t", "oncall") != channel_id("t", "other")
    for tenant, name in (("t", "oncall"), ("t", "holidays"), ("acme", "x")):
        assert channel_id(tenant, name) != calendar_id(tenant, name)


def test_each_kind_is_created_with_its_target_at_version_one_and_rotation_zero() -> None:
    hook = webhook()
    assert (hook.kind, hook.target, hook.recipients) == (ChannelKind.WEBHOOK, HOOK, ())
    assert hook.version == 1 and hook.secret_rotation == 0 and not hook.deleted
    slack = Channel.create("t", "chat", "slack", SLACK, (), "team room", True, None, NOW)
    assert slack.kind is ChannelKind.SLACK and slack.is_default
    mail = Channel.create("t", "mail", "email", "", ["a@example.com", "b.c+d@mail.example.org"],
                          "", False, None, NOW)
    assert mail.target == "" and mail.recipients == ("a@example.com",
                                                     "b.c+d@mail.example.org")
    assert names(hook) == ["ChannelCreated"]


def test_the_channels_events_are_the_catalogues_channel_events() -> None:
    events = {name for name, value in vars(Channel).items()
              if isinstance(value, type) and issubclass(value, Channel.Event)
              and name not in ("Event", "Created")}
    assert events == {e.value for e in ChannelEvent}


@pytest.mark.parametrize(("tenant", "name", "kind", "description", "field"), [
    ("t/x", "oncall", "webhook", "", "channel.tenant"),
    ("", "oncall", "webhook", "", "channel.tenant"),
    ("t", "", "webhook", "", "channel.name"),
    ("t", "on call", "webhook", "", "channel.name"),
    ("t", "x" * 129, "webhook", "", "channel.name"),
    ("t", "oncall", "pager", "", "channel.kind"),
    ("t", "oncall", "webhook", "x" * 501, "channel.description"),
])
def test_bad_channels_are_refused_naming_the_field(tenant: str, name: str, kind: str,
                                                   description: str, field: str) -> None:
    assert refused_field(lambda: Channel.create(tenant, name, kind, HOOK, (), description,
                                                False, None, NOW)) == field


@pytest.mark.parametrize("url", [
    HOOK,
    "https://hooks.example.com:8443/a/b?c=d",
    "https://203.0.113.7/hook",
    "https://[2001:db8::1]/hook",
    "http://127.0.0.1:8080/hook",
    "http://[::1]:8080/hook",
    "http://localhost/hook",
    "HTTPS://Hooks.Example.COM/x",
    LONGEST,
])
def test_webhook_urls_accepted(url: str) -> None:
    assert webhook(url).target == url


@pytest.mark.parametrize("url", [
    "",
    LONGEST + "p",
    "http://hooks.example.com/hook",
    "http://127.0.0.2/hook",
    "http://localhost.example.com/hook",
    "ftp://hooks.example.com/hook",
    "hooks.example.com/hook",
    "https:///hook",
    "https://user:secret@hooks.example.com/hook",
    "https://token@hooks.example.com/hook",
    "https://hooks.example.com:99999/hook",
    "https://hooks.example.com:0/hook",
    "https://hooks.example.com/a b",
    "https://hooks.example.com/\n",
    "https://hööks.example.com/hook",
    "https://hooks_example.com/hook",
    "https://hooks.example.com\\@evil.example/hook",
    "https://[fe80::1%25eth0]/hook",
    "https://1.2.3/hook",
    "https://0x7f.1/hook",
    "https://[::1/hook",
])
def test_webhook_urls_refused_naming_the_target(url: str) -> None:
    assert refused_field(lambda: webhook(url)) == "channel.target"


@pytest.mark.parametrize(("url", "accepted"), [
    (SLACK, True),
    ("http://127.0.0.1:9000/services/x", True),
    ("https://localhost/services/x", True),
    ("https://hooks.example.com/services/x", False),
    ("https://hooks.slack.com.evil.example/services/x", False),
    ("https://evil.example/hooks.slack.com", False),
    ("https://hooks.slack.com@evil.example/x", False),
    ("http://hooks.slack.com/services/x", False),
])
def test_a_slack_channel_posts_to_slack_or_to_loopback(url: str, accepted: bool) -> None:
    def create() -> Channel:
        return Channel.create("t", "chat", "slack", url, (), "", False, None, NOW)

    if accepted:
        assert create().target == url
    else:
        assert refused_field(create) == "channel.target"


@pytest.mark.parametrize("recipients", [
    (),
    [f"r{i}@example.com" for i in range(MAX_RECIPIENTS + 1)],
    ["not-an-address"],
    ["a@localhost"],
    ["a@@example.com"],
    ["a b@example.com"],
    ["a@example..com"],
    ["a@-example.com"],
    [".a@example.com"],
    ["a@example.com\r\nBcc: x@example.com"],
    ["a" * 65 + "@example.com"],
    ["a@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 63 + "." + "e" * 60 + ".com"],
    ["a@example.com", "A@Example.com"],
    "a@example.com",
])
def test_bad_recipients_are_refused_naming_the_recipients(recipients: Sequence[str]) -> None:
    assert refused_field(lambda: Channel.create("t", "mail", "email", "", recipients, "",
                                                False, None, NOW)) == "channel.recipients"


def test_a_channel_has_a_url_or_recipients_as_its_kind_says() -> None:
    assert refused_field(lambda: Channel.create("t", "mail", "email", HOOK,
                                                ["a@example.com"], "", False, None,
                                                NOW)) == "channel.target"
    assert refused_field(lambda: Channel.create("t", "hook", "webhook", HOOK,
                                                ["a@example.com"], "", False, None,
                                                NOW)) == "channel.recipients"
    ten = [f"r{i}@example.com" for i in range(MAX_RECIPIENTS)]
    assert Channel.create("t", "mail", "email", "", ten, "", False, None,
                          NOW).recipients == tuple(ten)


def test_an_update_replaces_the_target_and_a_stale_one_is_refused() -> None:
    hook = webhook()
    hook.update("https://other.example.com/x", (), "new", True, "r2", NOW,
                expected_version=1)
    assert hook.version == 2 and hook.target == "https://other.example.com/x"
    assert hook.description == "new" and hook.is_default and hook.kind is ChannelKind.WEBHOOK
    with pytest.raises(StaleVersion):
        hook.update(HOOK, (), "", False, "r3", NOW, expected_version=1)
    hook.update(HOOK, (), "", False, "r3", NOW)  # -1: any version
    assert hook.version == 3 and not hook.is_default
    assert names(hook) == ["ChannelCreated", "ChannelUpdated", "ChannelUpdated"]


def test_an_update_is_validated_like_a_creation() -> None:
    hook = webhook()
    assert refused_field(lambda: hook.update("http://hooks.example.com/", (), "", False,
                                             None, NOW)) == "channel.target"
    assert refused_field(lambda: hook.update(HOOK, (), "x" * 501, False, None,
                                             NOW)) == "channel.description"
    mail = Channel.create("t", "mail", "email", "", ["a@example.com"], "", False, None, NOW)
    assert refused_field(lambda: mail.update("", [], "", False, None,
                                             NOW)) == "channel.recipients"
    mail.update("", ["b@example.com", "c@example.com"], "", False, None, NOW)
    assert mail.recipients == ("b@example.com", "c@example.com")
    assert hook.version == 1 and mail.version == 2


def test_rotating_the_secret_increments_it_and_moves_the_version() -> None:
    hook = webhook()
    assert hook.rotate_secret("r2", NOW) == 1 and hook.rotate_secret("r3", NOW) == 2
    assert hook.secret_rotation == 2 and hook.version == 3
    with pytest.raises(StaleVersion):
        hook.update(HOOK, (), "", False, "r4", NOW, expected_version=1)
    assert names(hook) == ["ChannelCreated", "ChannelSecretRotated", "ChannelSecretRotated"]


def test_a_deleted_channel_cannot_be_updated_or_rotated_and_deletes_once() -> None:
    hook = Channel.create("t", "oncall", "webhook", HOOK, (), "", True, None, NOW)
    assert hook.delete("r2", NOW) and hook.deleted and not hook.is_default
    assert not hook.delete("r3", NOW)
    with pytest.raises(ChannelNotFound) as refused:
        hook.update(HOOK, (), "", False, "r4", NOW, expected_version=2)
    assert refused.value.status == "NOT_FOUND"
    with pytest.raises(ChannelNotFound):
        hook.rotate_secret("r5", NOW)
    assert hook.version == 2 and names(hook) == ["ChannelCreated", "ChannelDeleted"]


def test_events_replay_to_the_same_channel() -> None:
    hook = webhook()
    hook.update("https://other.example.com/x", (), "d", True, "r2", NOW)
    hook.rotate_secret("r3", NOW)
    hook.delete("r4", NOW)
    replayed: Channel | None = None
    for e in hook.collect_events():
        replayed = e.mutate(replayed)
    assert replayed is not None and replayed.id == hook.id and replayed.version == 4
    assert (replayed.target, replayed.description, replayed.secret_rotation,
            replayed.deleted, replayed.is_default) == (hook.target, "d", 1, True, False)


def test_a_tenant_has_at_most_so_many_channels() -> None:
    check_channel_count("t", MAX_CHANNELS_PER_TENANT - 1)
    with pytest.raises(ChannelLimitReached) as refused:
        check_channel_count("t", MAX_CHANNELS_PER_TENANT)
    assert isinstance(refused.value, TenantLimitReached)
    assert refused.value.status == "RESOURCE_EXHAUSTED"
    assert MAX_CHANNELS_PER_TENANT == 20


def test_the_errors_carry_their_status() -> None:
    assert ChannelExists.status == "ALREADY_EXISTS"
    assert ChannelNotFound.status == "NOT_FOUND"
    assert InvalidSpec("channel.target", "x").status == "INVALID_ARGUMENT"


def test_a_deleted_channel_is_recreated_at_the_next_rotation_never_at_zero() -> None:
    hook = Channel.create("t", "oncall", "webhook", HOOK, (), "", True, None, NOW)
    hook.rotate_secret("r2", NOW)
    with pytest.raises(ChannelExists):
        hook.recreate("email", "", ("a@b.example",), "", False, "r3", NOW)
    hook.delete("r4", NOW)
    with pytest.raises(InvalidSpec) as refused:
        hook.recreate("email", HOOK, (), "", False, "r5", NOW)
    assert refused.value.field == "channel.target" and hook.deleted
    hook.recreate("email", "", ("a@b.example",), "mail now", True, "r6", NOW)
    assert (hook.kind, hook.target, hook.recipients, hook.description) == (
        ChannelKind.EMAIL, "", ("a@b.example",), "mail now")
    assert not hook.deleted and hook.is_default and hook.secret_rotation == 2
    assert hook.version == 4
    events = list(hook.collect_events())
    assert type(events[-1]).__name__ == ChannelEvent.RESTORED
    replayed: Channel | None = None
    for e in events:
        replayed = e.mutate(replayed)
    assert replayed is not None and replayed.secret_rotation == 2 and not replayed.deleted
