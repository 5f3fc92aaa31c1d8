"""The CLI's `channels` commands (issue 37): what each sends through the client, what is
refused before anything is sent, and the tables, with the secret shown by create and
rotate-secret only."""

from __future__ import annotations

from typing import Any

import pytest

from cronlog.cli.channels import channels_command
from cronlog.cli.commands import run_client
from cronlog.cli.output import as_table
from cronlog.cli.token import TOKEN_FILE_VARIABLE, TOKEN_VARIABLE
from cronlog.infra.entrypoints.cli import _parser
from cronlog.v1 import job_service_pb2 as pb

HOOK = "https://hooks.example.com/x"
CURRENT = pb.Channel(name="ops", kind="webhook", url=HOOK, description="on call",
                     is_default=True, version=3, tenant="acme")


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            if name == "get_channel":
                return CURRENT
            if name in ("create_channel", "rotate_channel_secret"):
                return pb.CreateChannelResponse(channel=CURRENT, signing_secret="whsec_x")
            if name == "list_channels":
                return type("Page", (), {"items": [CURRENT], "next_page_token": ""})()
            return CURRENT
        return call


def sent(*argv: str) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    client = FakeClient()
    channels_command(client, _parser().parse_args(list(argv)))  # type: ignore[arg-type]
    return client.calls[-1]


def test_create_sends_the_kind_and_its_destination() -> None:
    name, args, kwargs = sent("channels", "create", "ops", "--kind", "webhook", "--url", HOOK,
                              "--default", "--description", "on call", "--tenant", "acme")
    assert (name, args) == ("create_channel", ("acme", "ops"))
    assert kwargs["kind"] == "webhook" and kwargs["url"] == HOOK and kwargs["is_default"]
    name, args, kwargs = sent("channels", "create", "mail", "--kind", "email",
                              "--recipient", "a@b.example", "--recipient", "c@d.example")
    assert kwargs["recipients"] == ["a@b.example", "c@d.example"] and kwargs["url"] == ""


def test_update_keeps_what_is_not_given_at_the_version_read() -> None:
    name, args, kwargs = sent("channels", "update", "ops", "--no-default")
    assert name == "update_channel" and args == ("", "ops")
    assert (kwargs["url"], kwargs["description"], kwargs["is_default"],
            kwargs["expected_version"]) == (HOOK, "on call", False, 3)
    _, _, kwargs = sent("channels", "update", "ops", "--url", HOOK + "/2",
                        "--expected-version", "0")
    assert kwargs["url"] == HOOK + "/2" and kwargs["is_default"] is True
    assert kwargs["expected_version"] == 0


def test_the_other_actions_name_the_channel() -> None:
    for action, method in (("get", "get_channel"), ("delete", "delete_channel"),
                           ("rotate-secret", "rotate_channel_secret")):
        name, args, _ = sent("channels", action, "ops", "--tenant", "acme")
        assert (name, args) == (method, ("acme", "ops"))
    name, args, _ = sent("channels", "list", "--page-size", "5")
    assert (name, args) == ("list_channels", ("", 5, ""))


@pytest.mark.parametrize("argv", [
    ["channels", "update", "ops"],
])
def test_nothing_to_change_is_a_usage_error_before_anything_is_sent(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_client(_parser().parse_args(["--address", "127.0.0.1:1", *argv])) == 2
    assert "nothing to change" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["channels", "create", "ops"],
    ["channels", "create", "ops", "--kind", "pager"],
    ["channels", "update", "ops", "--default", "--no-default"],
])
def test_bad_options_are_refused_by_the_parser(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        _parser().parse_args(argv)
    assert raised.value.code == 2


def test_the_secret_is_in_the_table_of_create_and_rotation_only() -> None:
    created = as_table(pb.CreateChannelResponse(channel=CURRENT, signing_secret="whsec_abc"))
    assert "whsec_abc" in created and "shown this once" in created
    rotated = as_table(pb.RotateChannelSecretResponse(channel=CURRENT,
                                                      signing_secret="whsec_def"))
    assert "whsec_def" in rotated
    got = as_table(pb.GetChannelResponse(channel=CURRENT))
    assert "whsec" not in got and "ops" in got and "webhook" in got and HOOK in got
    mail = pb.Channel(name="mail", kind="email", recipients=["a@b.example", "c@d.example"])
    listed = as_table(pb.ListChannelsResponse(channels=[CURRENT, mail], next_page_token="t"))
    assert "a@b.example, c@d.example" in listed and "t" in listed.splitlines()[-1]


def test_test_sends_the_channel_and_shows_the_attempt() -> None:
    name, args, _ = sent("channels", "test", "ops", "--tenant", "acme")
    assert (name, args) == ("test_channel", ("acme", "ops"))
    shown = as_table(pb.TestChannelResponse(delivered=False, status_code=500, latency_ms=12,
                                            error="HTTP 500 from 127.0.0.1",
                                            delivery_id="d-1"))
    assert shown.splitlines()[0].split() == ["DELIVERED", "STATUS", "LATENCY", "DELIVERY",
                                             "ID", "ERROR"]
    assert shown.splitlines()[1].split()[:5] == ["no", "500", "12", "ms", "d-1"]


@pytest.mark.parametrize(("delivered", "status"), [(True, 0), (False, 1)])
def test_test_exits_non_zero_when_not_delivered(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        delivered: bool, status: int) -> None:
    class Answering(FakeClient):
        def test_channel(self, tenant: str, name: str) -> pb.TestChannelResponse:
            return pb.TestChannelResponse(delivered=delivered, status_code=204,
                                          delivery_id="d-1")

        def __enter__(self) -> Answering:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr("cronlog.cli.commands._client", lambda *_: Answering())
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    monkeypatch.delenv(TOKEN_FILE_VARIABLE, raising=False)
    assert run_client(_parser().parse_args(["channels", "test", "ops", "--tenant", "acme"])
                      ) == status
    assert '"delivery_id": "d-1"' in capsys.readouterr().out
