"""CRONLOG_WORKER_TENANT_SHARE: a fraction in (0, 1], a half by default, refused by name when
it is anything else, and passed on to the processes a development tool starts."""

from __future__ import annotations

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog_dev.processes import settings_env


def test_a_half_by_default_and_any_fraction_up_to_one() -> None:
    assert settings_from_env({}).worker_tenant_share == 0.5
    assert settings_from_env({"CRONLOG_WORKER_TENANT_SHARE": ""}).worker_tenant_share == 0.5
    for raw, value in (("0.25", 0.25), ("1", 1.0), (" .1 ", 0.1), ("1e-2", 0.01)):
        assert settings_from_env({"CRONLOG_WORKER_TENANT_SHARE": raw}
                                 ).worker_tenant_share == value


@pytest.mark.parametrize("raw", ["0", "-0.5", "1.5", "half", "nan", "inf", "50%"])
def test_anything_else_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_env({"CRONLOG_WORKER_TENANT_SHARE": raw})
    assert str(error.value).startswith("CRONLOG_WORKER_TENANT_SHARE: "), error.value
    assert repr(raw) in str(error.value) or raw in str(error.value)


def test_the_development_tools_pass_it_to_their_workers() -> None:
    for share in (0.5, 0.3, 1.0, 1 / 3):
        again = settings_from_env(settings_env(Settings(worker_tenant_share=share)))
        assert again.worker_tenant_share == share
