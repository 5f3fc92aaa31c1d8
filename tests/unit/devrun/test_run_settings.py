"""`make run`'s settings: the user's CRONLOG_* variables win over the stack's defaults, the
stack's own addresses and passwords are refused by name, invalid values get the service's
own error, and the env file for operator commands is written 0600 from the first byte."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog_dev.example_handlers import (
    EXAMPLE_MODULE,
    EXAMPLE_SOURCES,
    example_defaults,
    worker_path,
)
from cronlog_dev.processes import role_environment
from cronlog_dev.run import port_offset, run_ports, write_env_file
from cronlog_dev.run_plan import PROMETHEUS_PORT, run_plan
from cronlog_dev.run_settings import (
    STACK_OWNED,
    InvalidRunSetting,
    StackOwnedSetting,
    merge,
)
from cronlog_dev.stack.local_stack import RUN_PORTS

PASSWORD = "0123456789abcdef"
STACK = Settings(kafka_bootstrap="127.0.0.1:39092",
                 postgres_dsn=f"postgresql://cronlog:{PASSWORD}@127.0.0.1:35432/cronlog",
                 clickhouse_host="127.0.0.1", clickhouse_port=39000, clickhouse_user="cronlog",
                 clickhouse_password=PASSWORD, grpc_address="127.0.0.1:50051")
PLANNED = {name: value for p in run_plan() for name, value in p.env.items()}


def test_the_users_settings_win_over_the_stacks_defaults() -> None:
    run = merge({"CRONLOG_PARTITIONS": "1024", "CRONLOG_TENANT_MAX_IN_FLIGHT": "1000000",
                 "CRONLOG_WORKER_SLOTS": "3", "CRONLOG_REPLY_TIMEOUT_MS": "20000",
                 "HOME": "/h"}, STACK, PLANNED, brokers=1)
    assert run.settings.partitions == 1024
    assert run.settings.tenant_limits.default.max_in_flight == 1_000_000
    assert run.settings.worker_slots == 3
    assert run.env["CRONLOG_REPLY_TIMEOUT_MS"] == "20000"
    # The stack's own values are what the roles connect with.
    assert run.settings.kafka_bootstrap == STACK.kafka_bootstrap
    assert run.settings.postgres_dsn == STACK.postgres_dsn
    assert run.settings.clickhouse_password == PASSWORD
    assert "HOME" not in run.env
    # The roles read exactly these variables: what they parse is what the launcher decided.
    # (instance_id aside: each process draws its own.)
    reread = settings_from_env(run.env)
    assert reread == run.settings.with_overrides(instance_id=reread.instance_id)


def test_a_clusters_replication_is_the_stacks_default_and_the_user_may_lower_it() -> None:
    cluster = STACK.with_overrides(topic_replication_factor=3, topic_min_insync_replicas=2)
    assert merge({}, cluster, PLANNED, brokers=3).settings.topic_min_insync_replicas == 2
    lowered = merge({"CRONLOG_TOPIC_MIN_INSYNC_REPLICAS": "1"}, cluster, PLANNED, brokers=3)
    assert lowered.settings.topic_min_insync_replicas == 1
    assert lowered.settings.topic_replication_factor == 3
    with pytest.raises(InvalidRunSetting, match="CRONLOG_TOPIC_REPLICATION_FACTOR: 3 "
                                                "replicas need as many Kafka brokers"):
        merge({"CRONLOG_TOPIC_REPLICATION_FACTOR": "3"}, STACK, PLANNED, brokers=1)


@pytest.mark.parametrize("name", sorted(STACK_OWNED))
def test_each_of_the_stacks_own_variables_is_refused_by_name(name: str) -> None:
    with pytest.raises(StackOwnedSetting) as raised:
        merge({name: "elsewhere:1", "CRONLOG_PARTITIONS": "16"}, STACK, PLANNED, brokers=1)
    assert raised.value.names == [name]
    assert str(raised.value).startswith(f"{name} is `make run`'s own and cannot be set")
    assert "elsewhere" not in str(raised.value)


def test_every_refused_variable_is_named_at_once_and_no_value_is_shown() -> None:
    with pytest.raises(StackOwnedSetting) as raised:
        merge({"CRONLOG_POSTGRES_DSN": "postgresql://me:topsecret@db/x",
               "CRONLOG_CLICKHOUSE_PASSWORD": "topsecret"}, STACK, PLANNED, brokers=1)
    assert raised.value.names == ["CRONLOG_POSTGRES_DSN", "CRONLOG_CLICKHOUSE_PASSWORD"]
    assert "topsecret" not in str(raised.value)


def test_the_stacks_own_values_are_no_conflict_nor_is_an_empty_variable() -> None:
    """A shell that loaded the last run's env file starts the next run unchanged."""
    env = {"CRONLOG_KAFKA_BOOTSTRAP": STACK.kafka_bootstrap,
           "CRONLOG_CLICKHOUSE_PASSWORD": PASSWORD, "CRONLOG_API_METRICS_PORT": "39081",
           "CRONLOG_GRPC_ADDRESS": "", "CRONLOG_ENV_FILE": "/elsewhere/cronlog.env",
           "CRONLOG_KAFKA_BROKERS": "1", "CRONLOG_STATE_DIR": "/tmp/x",
           "CRONLOG_RUN_PORT_OFFSET": "-20000"}
    run = merge(env, STACK, PLANNED, brokers=1)
    assert run.given == {}
    for launcher_own in ("CRONLOG_ENV_FILE", "CRONLOG_KAFKA_BROKERS", "CRONLOG_STATE_DIR",
                         "CRONLOG_RUN_PORT_OFFSET"):
        assert launcher_own not in run.env


@pytest.mark.parametrize(("name", "value"), [
    ("CRONLOG_PARTITIONS", "many"), ("CRONLOG_TENANT_MAX_IN_FLIGHT", "0"),
    ("CRONLOG_OWNER_SESSION_TIMEOUT_MS", "1000"), ("CRONLOG_WORKER_QUEUES", "undeclared"),
    ("CRONLOG_TENANT_LIMITS", "acme:1"),
])
def test_an_invalid_value_gets_the_services_own_error(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as service:
        settings_from_env({name: value})
    with pytest.raises(InvalidRunSetting) as launcher:
        merge({name: value}, STACK, PLANNED, brokers=1)
    assert str(launcher.value) == str(service.value)
    assert str(launcher.value).startswith(name)


def test_the_banner_shows_only_what_changes_something_and_no_secret() -> None:
    run = merge({"CRONLOG_PARTITIONS": "8", "CRONLOG_WORKER_SLOTS": "4",
                 "CRONLOG_TENANT_TOKENS": "acme=tok", "CRONLOG_LOG_FORMAT": "json"},
                STACK, PLANNED, brokers=1)
    assert run.non_default() == {"CRONLOG_LOG_FORMAT": "json",
                                 "CRONLOG_TENANT_TOKENS": "(set; not shown)",
                                 "CRONLOG_WORKER_SLOTS": "4"}


def test_the_banner_names_a_misspelt_setting_instead_of_showing_it_as_one(
        tmp_path: Path) -> None:
    from cronlog_dev.run import settings_lines

    run = merge({"CRONLOG_WORKER_SLOTS": "4", "CRONLOG_TENANT_MAX_INFLIGHT": "5"},
                STACK, PLANNED, brokers=1)
    assert run.non_default() == {"CRONLOG_WORKER_SLOTS": "4"}
    banner = settings_lines(run, tmp_path / "cronlog.env")
    assert "  CRONLOG_TENANT_MAX_INFLIGHT is not a setting of cronlog's (did you mean " \
           "CRONLOG_TENANT_MAX_IN_FLIGHT?); it is ignored" in banner.splitlines()


def test_the_env_file_reaches_the_stack_and_carries_the_users_settings() -> None:
    run = merge({"CRONLOG_PARTITIONS": "16", "CRONLOG_WORKER_SLOTS": "4",
                 "CRONLOG_KAFKA_CONFIG": "linger.ms=5\nbatch.num.messages=100"},
                STACK, PLANNED, brokers=1)
    lines = run.env_file_lines()
    values = dict(line.split("=", 1) for line in lines if not line.startswith("#"))
    assert values["CRONLOG_POSTGRES_DSN"] == STACK.postgres_dsn
    assert values["CRONLOG_CLICKHOUSE_PASSWORD"] == PASSWORD
    assert values["CRONLOG_CLICKHOUSE_USER"] == "cronlog"
    assert values["CRONLOG_GRPC_ADDRESS"] == "127.0.0.1:50051"
    assert values["CRONLOG_PARTITIONS"] == "16"
    assert values["CRONLOG_WORKER_SLOTS"] == "4"
    assert values["CRONLOG_TOPIC_PREFIX"] == "cronlog."
    # A value of several lines cannot be a KEY=VALUE line: said, not mangled.
    assert "CRONLOG_KAFKA_CONFIG" not in values
    assert any(line.startswith("# CRONLOG_KAFKA_CONFIG") for line in lines)
    # The roles' own ports would clash with make run's if an operator command took them.
    assert not any(name in values for name in PLANNED)


def test_the_env_file_is_never_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "run" / "cronlog.env"
    old = os.umask(0)  # the loosest a user could have
    try:
        write_env_file(path, ["CRONLOG_A=1"])
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.chmod(0o644)  # an old file left readable is replaced, not written into
        write_env_file(path, ["CRONLOG_A=2"])
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().splitlines()[-1] == "CRONLOG_A=2"
    assert [p.name for p in path.parent.iterdir()] == ["cronlog.env"]


def test_roles_get_the_decided_settings_and_nothing_inherited_under_cronlog_() -> None:
    env = role_environment({"PATH": "/bin", "CRONLOG_ENV_FILE": "old.env",
                            "CRONLOG_PARTITIONS": "1024"},
                           {"CRONLOG_PARTITIONS": "16"}, {"CRONLOG_API_METRICS_PORT": "1"})
    assert env == {"PATH": "/bin", "CRONLOG_PARTITIONS": "16",
                   "CRONLOG_API_METRICS_PORT": "1"}


def test_a_port_offset_moves_every_port_of_the_run() -> None:
    assert port_offset({}) == 0
    assert port_offset({"CRONLOG_RUN_PORT_OFFSET": "-20000"}) == -20000
    with pytest.raises(Exception, match="CRONLOG_RUN_PORT_OFFSET: expected a whole number"):
        port_offset({"CRONLOG_RUN_PORT_OFFSET": "x"})
    ports, plan = run_ports(-20000, brokers=1)
    assert ports.kafka == RUN_PORTS.kafka - 20000 and ports.grpc == RUN_PORTS.grpc - 20000
    assert [p.port for p in plan] == [p.port - 20000 for p in run_plan()]
    with pytest.raises(Exception, match="outside 1024-65535"):
        run_ports(65535 - PROMETHEUS_PORT + 1, brokers=1)


def test_make_runs_worker_offers_the_example_handlers_unless_told_otherwise(
        tmp_path: Path) -> None:
    """README, "Run your own code": the first job may name example.report."""
    assert merge({}, STACK, PLANNED, brokers=1).settings.worker_handlers == (EXAMPLE_MODULE,)
    assert not merge({}, STACK, PLANNED, brokers=1).non_default()
    mine = merge({"CRONLOG_WORKER_HANDLERS": "backups.jobs"}, STACK, PLANNED, brokers=1)
    assert mine.settings.worker_handlers == ("backups.jobs",)
    assert worker_path({"PYTHONPATH": "/mine"}) == {
        "PYTHONPATH": f"{EXAMPLE_SOURCES}{os.pathsep}/mine"}
    assert worker_path({}) == {"PYTHONPATH": str(EXAMPLE_SOURCES)}
    # Outside a checkout (no examples folder) nothing is added.
    assert example_defaults(tmp_path) == {} and worker_path({}, tmp_path) == {}
