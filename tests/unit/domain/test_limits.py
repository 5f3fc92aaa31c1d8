from __future__ import annotations

import pytest

from cronlog.domain.limits import TenantLimit, TenantLimitReached, TenantLimits
from cronlog.infra.config import ConfigError
from cronlog.infra.config_env import settings_from_env


def test_overrides_and_the_default() -> None:
    limits = TenantLimits(TenantLimit(5, 10), {"big": TenantLimit(100, 1000)})
    assert limits.of("big").max_jobs == 100 and limits.of("small").max_jobs == 5
    limits.check_new_job("small", 4)
    with pytest.raises(TenantLimitReached, match="has 5 jobs; its limit is 5"):
        limits.check_new_job("small", 5)


def test_an_owner_enforces_its_partitions_share_of_the_in_flight_limit() -> None:
    limits = TenantLimits(TenantLimit(5, 10))
    assert limits.in_flight_share("t", owned_partitions=8, partitions=8) == 10
    assert limits.in_flight_share("t", owned_partitions=3, partitions=8) == 4  # ceil(3.75)
    assert limits.in_flight_share("t", owned_partitions=1, partitions=1024) == 1


def test_limits_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_TENANT_MAX_JOBS": "50",
                                  "CRONLOG_TENANT_LIMITS": "acme:500:20, tiny:1:1"})
    assert settings.tenant_limits.default == TenantLimit(50, 1000)
    assert settings.tenant_limits.of("acme") == TenantLimit(500, 20)
    assert settings.tenant_limits.of("tiny") == TenantLimit(1, 1)


@pytest.mark.parametrize("value", ["acme:5", "acme:x:1", "acme:0:1", "bad tenant:1:1"])
def test_bad_limits_name_the_entry(value: str) -> None:
    with pytest.raises(ConfigError, match="CRONLOG_TENANT_LIMITS entry 1"):
        settings_from_env({"CRONLOG_TENANT_LIMITS": value})
