"""The `command` handler's settings: read from the environment, refused when unusable, and
the user commands run as decided at worker start."""

from __future__ import annotations

import pwd

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_commands import command_policy
from cronlog.infra.config_env import settings_from_env
from cronlog.worker.command_policy import CommandPolicy
from cronlog_dev.processes import settings_env


def test_unset_nothing_is_allowed_and_the_grace_is_ten_seconds() -> None:
    settings = settings_from_env({})
    assert (settings.command_allow, settings.command_user) == ((), "")
    assert command_policy(settings) == CommandPolicy((), None, 10.0)


def test_the_settings_are_read_and_passed_on_by_make_run() -> None:
    settings = settings_from_env({"CRONLOG_COMMAND_ALLOW": "/bin/echo, /opt/jobs/*",
                                  "CRONLOG_COMMAND_GRACE_SECONDS": "2.5"})
    assert settings.command_allow == ("/bin/echo", "/opt/jobs/*")
    assert settings.command_grace_seconds == 2.5
    again = settings_from_env(settings_env(settings))
    assert (again.command_allow, again.command_grace_seconds) == (("/bin/echo", "/opt/jobs/*"),
                                                                   2.5)


@pytest.mark.parametrize(("env", "problem"), [
    ({"CRONLOG_COMMAND_ALLOW": "echo"}, "CRONLOG_COMMAND_ALLOW: entry 1 ('echo') must be an "
                                        "absolute path"),
    ({"CRONLOG_COMMAND_GRACE_SECONDS": "soon"}, "CRONLOG_COMMAND_GRACE_SECONDS: expected "
                                                "seconds"),
    ({"CRONLOG_COMMAND_GRACE_SECONDS": "-1"}, "must be 0 to 3600 seconds"),
    ({"CRONLOG_COMMAND_GRACE_SECONDS": "nan"}, "must be 0 to 3600 seconds"),
    ({"CRONLOG_COMMAND_GRACE_SECONDS": "3601"}, "must be 0 to 3600 seconds"),
])
def test_an_unusable_value_is_named(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        settings_from_env(env)


def user(name: str, uid: int) -> pwd.struct_passwd:
    return pwd.struct_passwd((name, "x", uid, uid + 1, "", f"/home/{name}", "/bin/sh"))


def users(name: str) -> pwd.struct_passwd:
    known = {"batch": user("batch", 1500), "me": user("me", 1000)}
    return known[name]


def test_another_user_needs_a_worker_running_as_root() -> None:
    settings = Settings(command_allow=("/bin/echo",), command_user="batch")
    with pytest.raises(ConfigError) as error:
        command_policy(settings, euid=lambda: 1000, users=users)
    assert "CRONLOG_COMMAND_USER=batch: the worker runs as uid 1000, not as root" in str(
        error.value)


def test_the_workers_own_user_needs_no_switch() -> None:
    settings = Settings(command_user="me")
    assert command_policy(settings, euid=lambda: 1000, users=users).run_as is None


def test_an_unknown_user_stops_the_start() -> None:
    with pytest.raises(ConfigError, match="no user named 'nobody-here'"):
        command_policy(Settings(command_user="nobody-here"), euid=lambda: 0, users=users)


def test_root_runs_commands_as_the_named_user_with_its_home() -> None:
    policy = command_policy(Settings(command_user="batch", command_grace_seconds=3.0),
                            euid=lambda: 0, users=users)
    assert policy.run_as is not None
    assert (policy.run_as.uid, policy.run_as.gid, policy.run_as.home) == (1500, 1501,
                                                                         "/home/batch")
    assert policy.grace_seconds == 3.0
