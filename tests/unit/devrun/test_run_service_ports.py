"""The ports of the tests' `make run` (tests/support/run_service.py): clear of a developer's
`make run`, of every test session's servers, and below the ephemeral range the e2e
services' free ports come from; documented commands map onto them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cronlog_dev.stack.local_stack import (
    TEST_CLUSTER_CONTROLLER_PORT,
    TEST_CLUSTER_KAFKA_PORT,
    TEST_PORTS,
    shifted,
)
from tests.support.run_service import (
    MAX_KAFKA_NODES,
    RUN_SERVICE_PORT_BASE,
    RunService,
    documented_ports,
)

# Session offsets (CRONLOG_TEST_PORT_OFFSET) as the README and the briefs use them. Two
# sessions 1,000 apart would meet (a 4th Kafka node's controller on the other's ClickHouse
# HTTP port), as the test stacks' own clusters would.
SESSION_OFFSETS = range(0, 1000, 100)
EPHEMERAL_LOW = 32768


def test_every_documented_port_is_named_once() -> None:
    assert len(set(documented_ports().values())) == len(documented_ports())


def servers_of_a_session(offset: int) -> set[int]:
    ports = shifted(TEST_PORTS, offset)
    taken = {ports.postgres, ports.clickhouse_tcp, ports.clickhouse_http, ports.grpc}
    for node in range(MAX_KAFKA_NODES):
        taken |= {ports.kafka + 10 * node, ports.kafka_controller + 10 * node,
                  TEST_CLUSTER_KAFKA_PORT + offset + 10 * node,
                  TEST_CLUSTER_CONTROLLER_PORT + offset + 10 * node}
    return taken


@pytest.mark.parametrize("session", SESSION_OFFSETS)
def test_a_sessions_run_meets_no_other_server(session: int) -> None:
    mine = {port + RUN_SERVICE_PORT_BASE + session for port in documented_ports().values()}
    assert max(mine) < EPHEMERAL_LOW and min(mine) > 1024
    assert not mine & set(documented_ports().values())  # a developer's `make run`
    for other in SESSION_OFFSETS:
        assert not mine & servers_of_a_session(other), other
        if other != session:
            theirs = {port + RUN_SERVICE_PORT_BASE + other
                      for port in documented_ports().values()}
            assert not mine & theirs, other


class _Process:
    pid = 0


def test_documented_commands_are_moved_onto_the_run() -> None:
    service = RunService(_Process(), -20000, Path("/s"), {}, Path("/s/out"))  # type: ignore[arg-type]
    assert service.port(50051) == 30051
    with pytest.raises(KeyError):
        service.port(8080)
    command = ("clickhouse-client --port 39000 --password x; curl 127.0.0.1:39081/metrics "
               "http://127.0.0.1:38080/ 390921 cronlog --env-file .cronlog/run/cronlog.env "
               "x/.cronlog/run/y")
    assert service.localize(command) == (
        "clickhouse-client --port 19000 --password x; curl 127.0.0.1:19081/metrics "
        "http://127.0.0.1:18080/ 390921 cronlog --env-file /s/run/cronlog.env "
        "x/.cronlog/run/y")
    assert service.grpc_address == "127.0.0.1:30051"
    assert service.env_file == Path("/s/run/cronlog.env")
