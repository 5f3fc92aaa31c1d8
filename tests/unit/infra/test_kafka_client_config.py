"""CRONLOG_KAFKA_CONFIG reaches every Kafka client cronlog builds, never changes what cronlog's
correctness rests on, and never shows a secret; ClickHouse's TLS settings reach its client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_connections import OWNED_KEYS, parse_kafka_config
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.kafka.client_config import (
    PARTITIONER,
    admin_config,
    consumer_config,
    owner_session_config,
    producer_config,
    transactional_producer_config,
)

SECURED = ("security.protocol=SASL_SSL\n"
           "sasl.mechanism=SCRAM-SHA-512\n"
           "# a comment, and a blank line\n"
           "\n"
           "sasl.username=cronlog\n"
           "sasl.password=p,a=ss word#1\n")


def test_every_client_gets_the_operators_settings() -> None:
    settings = settings_from_env({"CRONLOG_KAFKA_CONFIG": SECURED})
    configs = [producer_config(settings), transactional_producer_config(settings, "owner-1"),
               consumer_config(settings, "group"), consumer_config(settings, None),
               admin_config(settings)]
    for config in configs:
        assert config["security.protocol"] == "SASL_SSL"
        assert config["sasl.mechanism"] == "SCRAM-SHA-512"
        assert config["sasl.username"] == "cronlog"
        # Commas, '=' and '#' after the first '=' belong to the value: passwords may hold them.
        assert config["sasl.password"] == "p,a=ss word#1"


def test_cronlogs_own_settings_come_last_whatever_the_caller_passes() -> None:
    settings = Settings(kafka_bootstrap="b:9093", kafka_config=(("linger.ms", "20"),))
    producer = producer_config(settings, **{"acks": "1"})
    assert producer["acks"] == "all" and producer["enable.idempotence"] is True
    assert producer["partitioner"] == PARTITIONER and producer["bootstrap.servers"] == "b:9093"
    assert producer["linger.ms"] == "20", "the operator's tuning overrides cronlog's default"
    assert producer_config(settings, **{"linger.ms": 1})["linger.ms"] == 1
    consumer = consumer_config(settings, "g", **{"isolation.level": "read_uncommitted"})
    assert consumer["isolation.level"] == "read_committed"
    assert consumer["enable.auto.commit"] is False and consumer["group.id"] == "g"
    assert transactional_producer_config(settings, "t")["transactional.id"] == "t"


@pytest.mark.parametrize("key", sorted(OWNED_KEYS))
def test_settings_cronlog_owns_are_refused_naming_the_variable_and_line(key: str) -> None:
    text = f"security.protocol=SSL\n{key}=whatever\n"
    with pytest.raises(ConfigError) as refused:
        settings_from_env({"CRONLOG_KAFKA_CONFIG": text})
    assert f"CRONLOG_KAFKA_CONFIG line 2: {key}" in str(refused.value)
    # And a Settings made in code cannot slip one in either.
    with pytest.raises(ConfigError):
        admin_config(Settings(kafka_config=((key, "whatever"),)))


@pytest.mark.parametrize(("text", "expected"), [
    ("sasl.password SECRETVALUE", "line 1: expected 'key=value'"),
    ("Sasl Password=SECRETVALUE", "line 1: 'Sasl Password' is not a librdkafka property name"),
    ("sasl.username=\n", "line 1: sasl.username has no value"),
    ("transactional.id=SECRETVALUE", "line 1: transactional.id is cronlog's own"),
])
def test_malformed_lines_are_refused_without_echoing_their_values(text: str,
                                                                   expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as refused:
        parse_kafka_config(text, "CRONLOG_KAFKA_CONFIG")
    assert "SECRETVALUE" not in str(refused.value)


def test_librdkafka_refuses_a_misspelt_property_at_start() -> None:
    with pytest.raises(ConfigError, match=r"CRONLOG_KAFKA_CONFIG: .*sasl\.pasword"):
        settings_from_env({"CRONLOG_KAFKA_CONFIG": "sasl.pasword=hunter2-secret"})


def test_a_missing_ca_file_stops_the_process_at_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location"):
        settings_from_env({"CRONLOG_KAFKA_CONFIG": "security.protocol=SSL\n"
                                                   f"ssl.ca.location={tmp_path / 'nope.pem'}"})


def test_librdkafkas_complaint_never_shows_a_secret() -> None:
    # SASL without a username: librdkafka refuses, and the password never appears.
    with pytest.raises(ConfigError) as refused:
        settings_from_env({"CRONLOG_KAFKA_CONFIG": "security.protocol=SASL_SSL\n"
                                                   "sasl.mechanism=SCRAM-SHA-512\n"
                                                   "sasl.password=hunter2-secret"})
    assert "hunter2-secret" not in str(refused.value)


def test_the_file_and_the_variable_merge_and_may_not_both_set_a_key(tmp_path: Path) -> None:
    path = tmp_path / "kafka.properties"
    path.write_text(SECURED)
    settings = settings_from_env({"CRONLOG_KAFKA_CONFIG_FILE": str(path),
                                  "CRONLOG_KAFKA_CONFIG": "client.id=cronlog-eu"})
    assert dict(settings.kafka_config)["sasl.password"] == "p,a=ss word#1"
    assert dict(settings.kafka_config)["client.id"] == "cronlog-eu"
    with pytest.raises(ConfigError, match=r"sasl\.username is set twice"):
        settings_from_env({"CRONLOG_KAFKA_CONFIG_FILE": str(path),
                           "CRONLOG_KAFKA_CONFIG": "sasl.username=other"})
    path.write_text("security.protocol=SSL\nsasl.password\n")
    with pytest.raises(ConfigError, match=f"CRONLOG_KAFKA_CONFIG_FILE {path} line 2"):
        settings_from_env({"CRONLOG_KAFKA_CONFIG_FILE": str(path)})
    with pytest.raises(ConfigError, match="cannot read"):
        settings_from_env({"CRONLOG_KAFKA_CONFIG_FILE": str(tmp_path / "missing")})


def test_the_settings_stay_out_of_repr() -> None:
    settings = settings_from_env({"CRONLOG_KAFKA_CONFIG": SECURED})
    assert "p,a=ss word#1" not in repr(settings)
    assert "sasl" not in repr(settings)


def test_clickhouse_tls_settings_reach_the_client(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = settings_from_env({"CRONLOG_CLICKHOUSE_SECURE": "1",
                                  "CRONLOG_CLICKHOUSE_CA_FILE": str(ca)})
    assert (settings.clickhouse_secure, settings.clickhouse_verify,
            settings.clickhouse_ca_file) == (True, True, str(ca))
    from cronlog.infra.composition import build_run_history

    def connection_of(history: ClickHouseRunHistory) -> Any:
        # A client is made when a call first takes one; making it connects nothing.
        with history._clients.taken() as client:
            return client.connection

    connection = connection_of(build_run_history(settings))
    assert connection.secure_socket and connection.verify_cert
    assert connection.ssl_options["ca_certs"] == str(ca)

    unverified = settings_from_env({"CRONLOG_CLICKHOUSE_SECURE": "1",
                                    "CRONLOG_CLICKHOUSE_VERIFY": "0"})
    assert not connection_of(build_run_history(unverified)).verify_cert
    plain = connection_of(ClickHouseRunHistory("127.0.0.1", 9000, "cronlog"))
    assert not plain.secure_socket


@pytest.mark.parametrize(("env", "expected"), [
    ({"CRONLOG_CLICKHOUSE_CA_FILE": "/etc/ca.pem"}, "set CRONLOG_CLICKHOUSE_SECURE=1"),
    ({"CRONLOG_CLICKHOUSE_VERIFY": "0"}, "set CRONLOG_CLICKHOUSE_SECURE=1"),
    ({"CRONLOG_CLICKHOUSE_SECURE": "yes please"}, "CRONLOG_CLICKHOUSE_SECURE: expected 1 or 0"),
    ({"CRONLOG_CLICKHOUSE_SECURE": "1", "CRONLOG_CLICKHOUSE_CA_FILE": "/nonexistent/ca.pem"},
     "CRONLOG_CLICKHOUSE_CA_FILE /nonexistent/ca.pem: cannot read"),
])
def test_clickhouse_tls_settings_that_cannot_mean_tls_are_refused(env: dict[str, str],
                                                                  expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        settings_from_env(env)


def test_every_client_gets_past_a_dead_broker_quickly_unless_the_operator_says_otherwise(
        ) -> None:
    defaults = Settings(kafka_bootstrap="b:9093")
    tuned = Settings(kafka_bootstrap="b:9093",
                     kafka_config=(("topic.metadata.refresh.interval.ms", "30000"),))
    for settings, refresh in ((defaults, 500), (tuned, "30000")):
        for config in (producer_config(settings),
                       transactional_producer_config(settings, "owner-1"),
                       consumer_config(settings, "group"), admin_config(settings)):
            assert config["topic.metadata.refresh.interval.ms"] == refresh
            assert config["reconnect.backoff.max.ms"] == 1000


def test_the_owner_session_timeout_sets_the_schedulers_group_timing_not_the_transaction_s() -> None:
    settings = settings_from_env({"CRONLOG_OWNER_SESSION_TIMEOUT_MS": "20000"})
    assert owner_session_config(settings) == {"session.timeout.ms": 20000,
                                               "heartbeat.interval.ms": 1000}
    # A departed owner's open transaction is ended by the owner taking its partitions
    # (departed_owners.py), so the transaction timeout need not follow the session.
    assert transactional_producer_config(settings, "owner-1")["transaction.timeout.ms"] == 60_000
    default = settings_from_env({})
    assert owner_session_config(default)["session.timeout.ms"] == 6_000, "the brokers' floor"
    assert default.lookahead.total_seconds() > 6, "longer than a failover's detection"
    assert transactional_producer_config(default, "owner-1")["transaction.timeout.ms"] == 60_000
    assert owner_session_config(settings_from_env(
        {"CRONLOG_OWNER_SESSION_TIMEOUT_MS": "300000"}))["heartbeat.interval.ms"] == 1000


@pytest.mark.parametrize("value", ["5999", "300001", "0", "six"])
def test_an_owner_session_timeout_out_of_range_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="CRONLOG_OWNER_SESSION_TIMEOUT_MS"):
        settings_from_env({"CRONLOG_OWNER_SESSION_TIMEOUT_MS": value})
