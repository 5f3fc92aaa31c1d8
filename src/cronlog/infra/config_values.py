"""One CRONLOG_* variable's value, checked: integers, fractions, rates, ports, durations,
flags. An unset or empty variable is the default; a wrong one a ConfigError naming it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta

from cronlog.infra.config import ConfigError

ENV = "CRONLOG_"


def _integer(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{ENV}{name}: expected an integer, got {raw!r}") from exc


def positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(ENV + name)
    if raw is None or raw == "":
        return default
    value = _integer(raw, name)
    if value <= 0:
        raise ConfigError(f"{ENV}{name}: must be positive, got {value}")
    return value


def nice(env: Mapping[str, str], name: str, default: int, lowest: int) -> int:
    raw = env.get(ENV + name, "")
    if raw == "":
        return default
    value = _integer(raw, name)
    if not lowest <= value <= 19:
        raise ConfigError(f"{ENV}{name}: must be {lowest} to 19, got {value}")
    return value


def _number(env: Mapping[str, str], name: str, default: float, expected: str,
            within: Callable[[float], bool], must_be: str) -> float:
    raw = env.get(ENV + name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{ENV}{name}: expected {expected}, got {raw!r}") from None
    if not within(value):  # nan is within nothing
        raise ConfigError(f"{ENV}{name}: must be {must_be}, got {raw}")
    return value


def fraction(env: Mapping[str, str], name: str, default: float) -> float:
    """A fraction greater than 0 and at most 1."""
    return _number(env, name, default, "a fraction such as 0.5", lambda v: 0.0 < v <= 1.0,
                   "greater than 0 and at most 1")


def rate(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive rate per second, such as 500 or 0.5."""
    return _number(env, name, default, "a rate per second such as 50 or 0.5",
                   lambda v: 0.0 < v < float("inf"), "a positive number")


def page_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """Seconds, more than 0 and at most 60 (a page is not a report)."""
    return _number(env, name, default, "seconds such as 5 or 2.5", lambda v: 0.0 < v <= 60.0,
                   "more than 0 and at most 60")


def port(env: Mapping[str, str], name: str) -> int:
    """A TCP port, 0 for none."""
    raw = env.get(ENV + name, "").strip()
    if raw == "":
        return 0
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigError(f"{ENV}{name}: expected a port from 0 (off) to 65535, got {raw!r}")
    return int(raw)


def millis(env: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    raw = env.get(ENV + name)
    if raw is None or raw == "":
        return default
    return timedelta(milliseconds=positive(env, name, 1))


def millis_within(env: Mapping[str, str], name: str, default: timedelta,
                  bounds: tuple[int, int]) -> timedelta:
    """Milliseconds from bounds[0] to bounds[1]."""
    value = millis(env, name, default)
    lowest, highest = bounds
    ms = value / timedelta(milliseconds=1)
    if not lowest <= ms <= highest:
        raise ConfigError(f"{ENV}{name}: must be {lowest} to {highest} ms, got {int(ms)}")
    return value


def flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(ENV + name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ConfigError(f"{ENV}{name}: expected 1 or 0, got {raw!r}")
