"""The `command` handler's settings from the environment, and its policy at worker start.

CRONLOG_COMMAND_ALLOW (programs allowed), CRONLOG_COMMAND_USER (whom they run as) and
CRONLOG_COMMAND_GRACE_SECONDS (SIGTERM to SIGKILL); docs/handlers.md."""

from __future__ import annotations

import math
import os
import pwd
from collections.abc import Callable, Mapping
from typing import TypedDict

from cronlog.infra.config import ConfigError, Settings
from cronlog.worker.command_policy import (
    ALLOW_VARIABLE,
    DEFAULT_GRACE_SECONDS,
    GRACE_VARIABLE,
    USER_VARIABLE,
    CommandPolicy,
    RunAs,
    parse_allow_list,
)

MAX_GRACE_SECONDS = 3600.0


class CommandSettings(TypedDict):
    command_allow: tuple[str, ...]
    command_user: str
    command_grace_seconds: float


def _grace(env: Mapping[str, str]) -> float:
    raw = env.get(GRACE_VARIABLE, "").strip()
    if raw == "":
        return DEFAULT_GRACE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{GRACE_VARIABLE}: expected seconds such as 10 or 2.5, "
                          f"got {raw!r}") from None
    if not (math.isfinite(value) and 0.0 <= value <= MAX_GRACE_SECONDS):
        raise ConfigError(f"{GRACE_VARIABLE}: must be 0 to {MAX_GRACE_SECONDS:g} seconds, "
                          f"got {raw}")
    return value


def command_settings_from_env(env: Mapping[str, str]) -> CommandSettings:
    try:
        allow = parse_allow_list(env.get(ALLOW_VARIABLE, ""))
    except ValueError as exc:
        raise ConfigError(f"{ALLOW_VARIABLE}: {exc}") from None
    return CommandSettings(command_allow=allow,
                           command_user=env.get(USER_VARIABLE, "").strip(),
                           command_grace_seconds=_grace(env))


def command_policy(settings: Settings, euid: Callable[[], int] = os.geteuid,
                   users: Callable[[str], pwd.struct_passwd] = pwd.getpwnam) -> CommandPolicy:
    """The worker's policy; a CRONLOG_COMMAND_USER it cannot become stops its start."""
    policy = CommandPolicy(settings.command_allow, None, settings.command_grace_seconds)
    name = settings.command_user
    if not name:
        return policy
    try:
        user = users(name)
    except KeyError:
        raise ConfigError(f"{USER_VARIABLE}: no user named {name!r} on this host") from None
    current = euid()
    if user.pw_uid == current:
        return policy
    if current != 0:
        raise ConfigError(
            f"{USER_VARIABLE}={name}: the worker runs as uid {current}, not as root, so it "
            f"cannot run commands as another user; start the worker as root or as {name}, "
            f"or unset {USER_VARIABLE}")
    groups = tuple(os.getgrouplist(user.pw_name, user.pw_gid))
    return CommandPolicy(settings.command_allow,
                         RunAs(user.pw_name, user.pw_uid, user.pw_gid, groups, user.pw_dir),
                         settings.command_grace_seconds)
