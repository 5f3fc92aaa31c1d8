"""The api's budget settings (issue 33, item 3): defaults, values from the environment,
bad ones refused naming the variable, and make run passing them to its processes."""

from __future__ import annotations

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog_dev.processes import settings_env


def test_defaults() -> None:
    settings = settings_from_env({})
    assert (settings.api_threads, settings.api_max_concurrent_rpcs,
            settings.api_tenant_share) == (32, 64, 0.5)
    assert (settings.tenant_command_rate, settings.tenant_command_burst) == (500.0, 5000)
    assert (settings.tenant_read_rate, settings.tenant_read_burst) == (100.0, 500)


def test_values_from_the_environment() -> None:
    settings = settings_from_env({
        "CRONLOG_API_THREADS": "16", "CRONLOG_API_MAX_CONCURRENT_RPCS": "40",
        "CRONLOG_API_TENANT_SHARE": "0.25", "CRONLOG_TENANT_COMMAND_RATE": "2.5",
        "CRONLOG_TENANT_COMMAND_BURST": "10", "CRONLOG_TENANT_READ_RATE": "0.5",
        "CRONLOG_TENANT_READ_BURST": "3"})
    assert (settings.api_threads, settings.api_max_concurrent_rpcs,
            settings.api_tenant_share) == (16, 40, 0.25)
    assert (settings.tenant_command_rate, settings.tenant_command_burst) == (2.5, 10)
    assert (settings.tenant_read_rate, settings.tenant_read_burst) == (0.5, 3)


@pytest.mark.parametrize(("name", "raw"), [
    ("API_THREADS", "0"), ("API_MAX_CONCURRENT_RPCS", "many"), ("API_TENANT_SHARE", "1.5"),
    ("TENANT_COMMAND_RATE", "0"), ("TENANT_COMMAND_RATE", "-1"), ("TENANT_READ_RATE", "nan"),
    ("TENANT_READ_RATE", "inf"), ("TENANT_READ_RATE", "fast"), ("TENANT_READ_BURST", "-3"),
    ("TENANT_COMMAND_BURST", "1.5"),
])
def test_bad_values_are_refused_naming_the_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_env({f"CRONLOG_{name}": raw})
    assert str(error.value).startswith(f"CRONLOG_{name}: "), error.value


def test_make_run_passes_them_on() -> None:
    settings = Settings(api_threads=8, api_max_concurrent_rpcs=20, api_tenant_share=0.75,
                        tenant_command_rate=3.5, tenant_command_burst=7,
                        tenant_read_rate=0.25, tenant_read_burst=2)
    again = settings_from_env(settings_env(settings))
    for name in ("api_threads", "api_max_concurrent_rpcs", "api_tenant_share",
                 "tenant_command_rate", "tenant_command_burst", "tenant_read_rate",
                 "tenant_read_burst"):
        assert getattr(again, name) == getattr(settings, name), name
