"""Settings for the outbound fence and ClickHouse credentials, and the own servers it fences."""

from __future__ import annotations

import ipaddress

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.outbound_policy import outbound_policy, own_servers
from cronlog.outbound.policy import DestinationRefused
from cronlog_dev.processes import settings_env


def test_http_allow_and_clickhouse_credentials_are_read_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_HTTP_ALLOW": " 10.0.0.0/8, hooks.internal:8443 ,",
                                  "CRONLOG_CLICKHOUSE_USER": "cronlog",
                                  "CRONLOG_CLICKHOUSE_PASSWORD": "s3cret"})
    assert settings.http_allow == ("10.0.0.0/8", "hooks.internal:8443")
    assert (settings.clickhouse_user, settings.clickhouse_password) == ("cronlog", "s3cret")
    assert "s3cret" not in repr(settings)
    defaults = settings_from_env({})
    assert (defaults.http_allow, defaults.clickhouse_user, defaults.clickhouse_password) == \
        ((), "default", "")


def test_a_bad_allow_list_entry_stops_the_process_naming_the_variable_and_entry() -> None:
    with pytest.raises(ConfigError, match=r"CRONLOG_HTTP_ALLOW: '10\.0\.0\.0/33'"):
        settings_from_env({"CRONLOG_HTTP_ALLOW": "10.0.0.0/8,10.0.0.0/33"})


def test_spawned_roles_get_the_credentials_and_allow_list() -> None:
    settings = Settings(clickhouse_user="cronlog", clickhouse_password="pw",
                        http_allow=("127.0.0.1:8080", "10.0.0.0/8"))
    again = settings_from_env(settings_env(settings))
    assert (again.clickhouse_user, again.clickhouse_password, again.http_allow) == \
        ("cronlog", "pw", settings.http_allow)


def test_own_servers_come_from_every_server_setting() -> None:
    settings = Settings(kafka_bootstrap="k1.example:9092,[2001:db8::1]:9093,k3",
                        postgres_dsn="postgresql://u:p@pg.example:6432/db",
                        clickhouse_host="ch.example", clickhouse_port=9440)
    assert set(own_servers(settings)) == {("k1.example", 9092), ("2001:db8::1", 9093),
                                          ("k3", 9092), ("pg.example", 6432),
                                          ("ch.example", 9440)}
    keyword = Settings(postgres_dsn="host=a.example,b.example port=5433,5434 dbname=x")
    assert {("a.example", 5433), ("b.example", 5434)} <= set(own_servers(keyword))


def test_the_workers_policy_refuses_own_servers_even_when_the_allow_list_opens_loopback() -> None:
    settings = Settings(kafka_bootstrap="127.0.0.1:49092",
                        postgres_dsn="postgresql://cronlog:pw@localhost:45432/cronlog",
                        clickhouse_port=49000, http_allow=("127.0.0.0/8",))
    policy = outbound_policy(settings)
    loopback = ipaddress.ip_address("127.0.0.1")
    for port in (49092, 45432, 49000):
        with pytest.raises(DestinationRefused, match="own servers"):
            policy.check("127.0.0.1", loopback, port)
    policy.check("127.0.0.1", loopback, 8080)
