"""`make run`'s plan: every role gets a metrics port of its own, clear of the stack's ports,
the console gets its address, the banner names every address, and a taken port is said
before anything starts."""

from __future__ import annotations

import json
import socket

import pytest

from cronlog.infra.observability.catalogue import ROLES as OBSERVED_ROLES
from cronlog.infra.observability.server import port_setting
from cronlog_dev.processes import ROLES
from cronlog_dev.prometheus_config import RULES_FILE, prometheus_config
from cronlog_dev.run_plan import (
    CONSOLE,
    banner,
    metrics_setting,
    metrics_targets,
    run_plan,
    unavailable,
)
from cronlog_dev.stack.local_stack import RUN_PORTS, TEST_PORTS

# A Kafka cluster's node i listens 10 * (i - 1) above node 1 (kafka_cluster.py), up to 9.
KAFKA_NODES = 9


def stack_ports() -> set[int]:
    ports = set()
    for plan in (RUN_PORTS, TEST_PORTS):
        ports |= {plan.postgres, plan.clickhouse_tcp, plan.clickhouse_http, plan.grpc}
        for node in range(KAFKA_NODES):
            ports |= {plan.kafka + 10 * node, plan.kafka_controller + 10 * node}
    return ports


def test_every_role_and_the_console_get_a_port_of_their_own_clear_of_the_stack() -> None:
    plan = run_plan()
    assert [p.role for p in plan] == [*ROLES, CONSOLE]
    ports = [p.port for p in plan]
    assert len(set(ports)) == len(ports)
    assert not set(ports) & stack_ports()
    # Every role that has operator endpoints is started with its port set.
    assert set(metrics_targets(plan)) == set(OBSERVED_ROLES)
    for p in plan:
        if p.role == CONSOLE:
            assert p.env == {"CRONLOG_CONSOLE_ADDRESS": f"127.0.0.1:{p.port}"}
        else:
            # The variable the role itself reads (observability/server.py).
            assert metrics_setting(p.role) == port_setting(p.role)  # type: ignore[arg-type]
            assert p.env[port_setting(p.role)] == str(p.port)  # type: ignore[arg-type]
            assert p.env["CRONLOG_METRICS_HOST"] == "127.0.0.1"


def test_a_role_without_a_port_or_two_roles_on_one_port_are_refused() -> None:
    with pytest.raises(ValueError, match="projector"):
        run_plan(metrics_ports={"api": 1, "scheduler": 2, "worker": 3, "notifier": 5})
    with pytest.raises(ValueError, match="one port"):
        run_plan(metrics_ports={"api": 1, "scheduler": 2, "worker": 3, "projector": 3,
                                "notifier": 5})


def test_the_banner_names_every_address() -> None:
    plan = run_plan()
    text = banner(plan, "prometheus --config.file=x.yml")
    for p in plan:
        if p.role == CONSOLE:
            assert f"Console: http://127.0.0.1:{p.port}/" in text
            assert f"http://127.0.0.1:{p.port}/healthz" in text
        else:
            base = f"http://127.0.0.1:{p.port}"
            line = next(line for line in text.splitlines() if line.strip().startswith(p.role))
            for path in ("/metrics", "/healthz", "/readyz"):
                assert base + path in line, line
    assert "prometheus --config.file=x.yml" in text


def test_the_prometheus_configuration_names_jobs_as_the_rules_expect() -> None:
    plan = run_plan()
    config = json.loads(prometheus_config(metrics_targets(plan), interval_seconds=1))
    assert config["global"]["scrape_interval"] == "1000ms"
    assert config["rule_files"] == [str(RULES_FILE)] and RULES_FILE.is_file()
    jobs = {job["job_name"]: job["static_configs"][0]["targets"]
            for job in config["scrape_configs"]}
    assert jobs == {f"cronlog-{p.role}": [f"127.0.0.1:{p.port}"]
                    for p in plan if p.role != CONSOLE}
    # The rules' jobs are cronlog-<role>: what CronlogRoleDown selects.
    assert 'job=~"cronlog-.*"' in RULES_FILE.read_text()


def test_a_taken_port_is_named_with_its_variable() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            free_port = free.getsockname()[1]
        plan = run_plan(metrics_ports={"api": port, "scheduler": free_port,
                                       "worker": free_port + 1, "projector": free_port + 2,
                                       "notifier": free_port + 4},
                        console_port=free_port + 3)
        problems = unavailable(plan)
    assert any(f"api's CRONLOG_API_METRICS_PORT 127.0.0.1:{port}: in use" == p
               for p in problems), problems
