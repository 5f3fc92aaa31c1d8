"""The CPU priorities the worker and the history projector take, from the environment."""

from __future__ import annotations

import pytest

from cronlog.infra.config import ConfigError
from cronlog.infra.config_env import settings_from_env


def test_defaults_raise_the_worker_and_lower_the_projector() -> None:
    settings = settings_from_env({})
    assert settings.worker_nice == -5
    assert settings.projector_nice == 10


def test_both_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_WORKER_NICE": "0", "CRONLOG_PROJECTOR_NICE": "19"})
    assert settings.worker_nice == 0
    assert settings.projector_nice == 19


@pytest.mark.parametrize(("name", "value", "message"), [
    ("CRONLOG_WORKER_NICE", "-21", "CRONLOG_WORKER_NICE: must be -20 to 19, got -21"),
    ("CRONLOG_WORKER_NICE", "high", "CRONLOG_WORKER_NICE: expected an integer, got 'high'"),
    ("CRONLOG_PROJECTOR_NICE", "-1", "CRONLOG_PROJECTOR_NICE: must be 0 to 19, got -1"),
])
def test_bad_values_name_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_env({name: value})
