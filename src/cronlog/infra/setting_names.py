"""The CRONLOG_* variables of an environment that cronlog does not read.

A misspelt setting (CRONLOG_TENANT_MAX_INFLIGHT) would otherwise pass silently, its default
in its place: a role says so when it starts, naming the closest setting, and `make run`
shows it in its banner. A warning, not a refusal: deployments set variables for their own
tools beside cronlog's.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator, Mapping

from cronlog.infra.config import ConfigError
from cronlog.infra.setting_catalogue import SETTINGS

PREFIX = "CRONLOG_"
# Read outside settings_from_env: by the CLI before it, by logging, by the client commands
# (setting_catalogue.py says which).
OTHER_NAMES = frozenset(s.name for s in SETTINGS
                        if s.read_by != "settings" and s.family_prefix is None)
# Families of names with a variable part: an analyst tenant's password.
OTHER_PREFIXES = tuple(p for p in (s.family_prefix for s in SETTINGS) if p is not None)


class _Asking(Mapping[str, str]):
    """An environment that remembers every name asked of it."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        return self._env[name]

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self.asked.add(name)
        return name in self._env

    def __iter__(self) -> Iterator[str]:
        return iter(self._env)

    def __len__(self) -> int:
        return len(self._env)


def known_names(env: Mapping[str, str]) -> set[str]:
    """Every name the settings read, with this environment (some are read only when
    another is set) and with none."""
    from cronlog.infra.config_env import settings_from_env

    names = set(OTHER_NAMES)
    for source in ({}, env):
        asking = _Asking(source)
        # The caller reports a bad value on its own; the names asked still count.
        with contextlib.suppress(ConfigError):
            settings_from_env(asking)
        names |= asking.asked
    return names


def unknown_names(env: Mapping[str, str]) -> dict[str, str | None]:
    """Each CRONLOG_* variable nothing reads, with the closest setting if there is one."""
    known = known_names(env)
    found: dict[str, str | None] = {}
    for name in sorted(n for n in env if n.startswith(PREFIX)):
        if name in known or name.startswith(OTHER_PREFIXES):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        found[name] = close[0] if close else None
    return found


def unknown_settings(env: Mapping[str, str]) -> list[str]:
    """One line per CRONLOG_* variable nothing reads, with the closest setting if any."""
    return [f"{name} is not a setting of cronlog's"
            f"{f' (did you mean {close}?)' if close else ''}; it is ignored"
            for name, close in unknown_names(env).items()]
