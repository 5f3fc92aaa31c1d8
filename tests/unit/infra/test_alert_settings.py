"""The notifier's delivery settings: the SMTP server (off by default), its login only with
STARTTLS and from a file, the HTTP receivers' timeout; each wrong value named at start."""

from __future__ import annotations

import ipaddress
from datetime import timedelta
from pathlib import Path

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.outbound_policy import outbound_policy, own_servers
from cronlog.outbound.policy import DestinationRefused
from cronlog_dev.processes import settings_env

SMTP = {"CRONLOG_SMTP_HOST": "smtp.example.com", "CRONLOG_SMTP_FROM": "alerts@example.com"}


def password_file(tmp_path: Path, text: str = "s3cret\n") -> str:
    path = tmp_path / "smtp-password"
    path.write_text(text)
    return str(path)


def test_everything_is_off_by_default() -> None:
    settings = settings_from_env({})
    assert (settings.smtp_host, settings.smtp_port, settings.smtp_from,
            settings.smtp_starttls, settings.smtp_username, settings.smtp_password) == \
        ("", 25, "", False, "", "")
    assert settings.alert_http_timeout == timedelta(seconds=5)


def test_a_server_with_its_login_is_read_and_the_password_kept_out_of_repr(
        tmp_path: Path) -> None:
    settings = settings_from_env({
        **SMTP, "CRONLOG_SMTP_PORT": "587", "CRONLOG_SMTP_STARTTLS": "1",
        "CRONLOG_SMTP_FROM": "cronlog <alerts@example.com>",
        "CRONLOG_SMTP_USERNAME": "cronlog", "CRONLOG_SMTP_PASSWORD_FILE":
            password_file(tmp_path), "CRONLOG_ALERT_HTTP_TIMEOUT_MS": "1500"})
    assert (settings.smtp_host, settings.smtp_port, settings.smtp_from,
            settings.smtp_starttls, settings.smtp_username, settings.smtp_password) == \
        ("smtp.example.com", 587, "cronlog <alerts@example.com>", True, "cronlog", "s3cret")
    assert settings.alert_http_timeout == timedelta(milliseconds=1500)
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(("env", "error"), [
    ({"CRONLOG_SMTP_FROM": "alerts@example.com"},
     "CRONLOG_SMTP_FROM apply to e-mail channels only: set CRONLOG_SMTP_HOST"),
    ({"CRONLOG_SMTP_STARTTLS": "1"}, "CRONLOG_SMTP_STARTTLS apply to e-mail"),
    ({"CRONLOG_SMTP_HOST": "smtp.example.com"}, "CRONLOG_SMTP_FROM: required with"),
    ({**SMTP, "CRONLOG_SMTP_HOST": "smtp.example.com:587"}, "CRONLOG_SMTP_HOST: expected a host"),
    ({**SMTP, "CRONLOG_SMTP_HOST": "a b"}, "CRONLOG_SMTP_HOST: expected a host"),
    ({**SMTP, "CRONLOG_SMTP_PORT": "0"}, "CRONLOG_SMTP_PORT: expected a port from 1 to 65535"),
    ({**SMTP, "CRONLOG_SMTP_PORT": "65536"}, "CRONLOG_SMTP_PORT: expected a port"),
    ({**SMTP, "CRONLOG_SMTP_FROM": "alerts"}, "CRONLOG_SMTP_FROM: expected an address"),
    ({**SMTP, "CRONLOG_SMTP_FROM": "a@example.com\r\nBcc: x@example.com"},
     "CRONLOG_SMTP_FROM: one line"),
    ({**SMTP, "CRONLOG_SMTP_STARTTLS": "maybe"}, "CRONLOG_SMTP_STARTTLS: expected 1 or 0"),
    ({**SMTP, "CRONLOG_SMTP_USERNAME": "cronlog", "CRONLOG_SMTP_STARTTLS": "1"},
     "must be set together"),
    ({"CRONLOG_ALERT_HTTP_TIMEOUT_MS": "50"}, "CRONLOG_ALERT_HTTP_TIMEOUT_MS: must be 100 to"),
    ({"CRONLOG_ALERT_HTTP_TIMEOUT_MS": "60001"}, "must be 100 to 60000 ms"),
    ({"CRONLOG_ALERT_HTTP_TIMEOUT_MS": "soon"}, "expected an integer"),
])
def test_a_wrong_value_is_named(env: dict[str, str], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        settings_from_env(env)


def test_a_password_never_travels_in_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must not travel in clear; set "
                                          "CRONLOG_SMTP_STARTTLS=1"):
        settings_from_env({**SMTP, "CRONLOG_SMTP_USERNAME": "cronlog",
                           "CRONLOG_SMTP_PASSWORD_FILE": password_file(tmp_path)})


@pytest.mark.parametrize(("text", "error"), [
    ("", "expected one line"), ("one\ntwo\n", "expected one line"),
    ("x" * 5000, "more than 4096 bytes")])
def test_a_password_file_holds_one_password(tmp_path: Path, text: str, error: str) -> None:
    env = {**SMTP, "CRONLOG_SMTP_STARTTLS": "1", "CRONLOG_SMTP_USERNAME": "cronlog",
           "CRONLOG_SMTP_PASSWORD_FILE": password_file(tmp_path, text)}
    with pytest.raises(ConfigError, match=error) as caught:
        settings_from_env(env)
    assert "two" not in str(caught.value) and "xxxx" not in str(caught.value)


def test_a_missing_password_file_is_named() -> None:
    with pytest.raises(ConfigError, match="CRONLOG_SMTP_PASSWORD_FILE /nowhere/pw: cannot read"):
        settings_from_env({**SMTP, "CRONLOG_SMTP_STARTTLS": "1",
                           "CRONLOG_SMTP_USERNAME": "u",
                           "CRONLOG_SMTP_PASSWORD_FILE": "/nowhere/pw"})


def test_spawned_roles_get_the_smtp_settings_and_the_file_not_the_password(
        tmp_path: Path) -> None:
    settings = settings_from_env({
        **SMTP, "CRONLOG_SMTP_PORT": "2525", "CRONLOG_SMTP_STARTTLS": "1",
        "CRONLOG_SMTP_USERNAME": "cronlog",
        "CRONLOG_SMTP_PASSWORD_FILE": password_file(tmp_path),
        "CRONLOG_ALERT_HTTP_TIMEOUT_MS": "2500"})
    env = settings_env(settings)
    assert "s3cret" not in env.values()
    again = settings_from_env(env)
    fields = ("smtp_host", "smtp_port", "smtp_from", "smtp_starttls", "smtp_username",
              "smtp_password_file", "smtp_password", "alert_http_timeout")
    assert [getattr(again, f) for f in fields] == [getattr(settings, f) for f in fields]
    assert settings_from_env(settings_env(Settings())).smtp_host == ""


def test_the_smtp_server_is_one_of_the_deployments_own() -> None:
    settings = Settings(smtp_host="127.0.0.1", smtp_port=2525, smtp_from="a@example.com",
                        http_allow=("127.0.0.0/8",))
    assert ("127.0.0.1", 2525) in own_servers(settings)
    with pytest.raises(DestinationRefused, match="own servers"):
        outbound_policy(settings).check("127.0.0.1", ipaddress.ip_address("127.0.0.1"), 2525)
    assert ("", 25) not in own_servers(Settings())
