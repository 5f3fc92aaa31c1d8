"""Open mode (no tenant tokens) stays on loopback unless CRONLOG_API_OPEN=1 says otherwise."""

from __future__ import annotations

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.grpc.auth import OpenBindRefused, check_open_bind, is_loopback_bind


@pytest.mark.parametrize("address", [
    "127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "LOCALHOST:1", "[::1]:50051",
    "unix:/run/cronlog.sock", "unix-abstract:cronlog",
])
def test_loopback_addresses(address: str) -> None:
    assert is_loopback_bind(address)


@pytest.mark.parametrize("address", [
    "0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.5:50051", "[fe80::1]:1",
    "api.example.com:50051", "127.0.0.1.nip.io:1", "[::ffff:10.0.0.1]:1",
])
def test_addresses_reachable_from_elsewhere(address: str) -> None:
    assert not is_loopback_bind(address)


def test_open_mode_refuses_a_public_bind_naming_the_variables() -> None:
    with pytest.raises(OpenBindRefused) as error:
        check_open_bind("0.0.0.0:50051", has_tokens=False, open_flag=False)
    assert isinstance(error.value, ConfigError)
    for name in ("CRONLOG_GRPC_ADDRESS", "CRONLOG_API_OPEN", "CRONLOG_TENANT_TOKENS"):
        assert name in str(error.value)


def test_tokens_or_the_explicit_flag_allow_a_public_bind() -> None:
    check_open_bind("0.0.0.0:50051", has_tokens=True, open_flag=False)
    check_open_bind("0.0.0.0:50051", has_tokens=False, open_flag=True)
    check_open_bind("127.0.0.1:50051", has_tokens=False, open_flag=False)


def test_the_api_server_refuses_before_it_connects_anywhere() -> None:
    from cronlog.infra.composition import build_api

    # Servers that do not exist: the refusal comes before any connection is tried.
    settings = Settings(grpc_address="0.0.0.0:0", kafka_bootstrap="192.0.2.1:1",
                        postgres_dsn="postgresql://nobody@192.0.2.1:1/none")
    with pytest.raises(OpenBindRefused):
        build_api(settings)


@pytest.mark.parametrize(("raw", "expected"), [
    ("", False), ("0", False), ("no", False), ("1", True), ("true", True), ("YES", True)])
def test_the_open_flag_from_the_environment(raw: str, expected: bool) -> None:
    assert settings_from_env({"CRONLOG_API_OPEN": raw}).api_open is expected


def test_a_misspelt_open_flag_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="CRONLOG_API_OPEN"):
        settings_from_env({"CRONLOG_API_OPEN": "please"})
