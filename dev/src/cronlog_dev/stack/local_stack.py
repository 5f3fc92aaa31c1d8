"""Brings up Kafka, PostgreSQL and ClickHouse on loopback under one state folder."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from cronlog.infra.config import Settings
from cronlog_dev.stack.clickhouse_server import ClickHouseServer
from cronlog_dev.stack.kafka_broker import KafkaBroker
from cronlog_dev.stack.postgres_server import PostgresServer
from cronlog_dev.stack.process import StackError
from cronlog_dev.stack.secrets import stack_secret


@dataclass(frozen=True)
class StackPorts:
    kafka: int
    kafka_controller: int
    postgres: int
    clickhouse_tcp: int
    clickhouse_http: int
    grpc: int


# `make run` and `make test` use different ports and state folders so both can be up at once.
RUN_PORTS = StackPorts(39092, 39093, 35432, 39000, 38123, 50051)
TEST_PORTS = StackPorts(49092, 49093, 45432, 49000, 48123, 50061)


def shifted(ports: StackPorts, offset: int) -> StackPorts:
    """The same ports moved by offset, so two test sessions on one machine do not meet."""
    return StackPorts(*(port + offset for port in (
        ports.kafka, ports.kafka_controller, ports.postgres, ports.clickhouse_tcp,
        ports.clickhouse_http, ports.grpc)))


class LocalStack:
    def __init__(self, state_dir: Path, ports: StackPorts, partitions: int = 8) -> None:
        self.state_dir = state_dir
        self.ports = ports
        self.partitions = partitions
        self.kafka = KafkaBroker(state_dir / "kafka", ports.kafka, ports.kafka_controller, partitions)
        self.postgres = PostgresServer(state_dir / "postgres", ports.postgres)
        self.clickhouse = ClickHouseServer(state_dir / "clickhouse", ports.clickhouse_tcp,
                                           ports.clickhouse_http)

    def _load_secrets(self) -> None:
        # Read when used, not when built: callers may empty the state folder in between.
        self.postgres.password = stack_secret(self.state_dir, "postgres-password")
        self.clickhouse.password = stack_secret(self.state_dir, "clickhouse-password")

    def start(self) -> None:
        for sub in ("kafka", "postgres", "clickhouse"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self._load_secrets()
        errors: list[BaseException] = []

        def start(server: KafkaBroker | PostgresServer | ClickHouseServer) -> None:
            try:
                server.start()
            except BaseException as exc:  # reported below, after every server had its try
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(s,), daemon=True)
                   for s in (self.kafka, self.postgres, self.clickhouse)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self.stop()
            raise StackError("; ".join(str(e) for e in errors)) from errors[0]

    def stop(self) -> None:
        for server in (self.kafka, self.postgres, self.clickhouse):
            server.stop()

    def settings(self, topic_prefix: str = "cronlog.") -> Settings:
        self._load_secrets()
        return Settings(
            kafka_bootstrap=self.kafka.bootstrap,
            postgres_dsn=self.postgres.dsn,
            clickhouse_host="127.0.0.1",
            clickhouse_port=self.ports.clickhouse_tcp,
            clickhouse_user=self.clickhouse.user,
            clickhouse_password=self.clickhouse.password,
            topic_prefix=topic_prefix,
            partitions=self.partitions,
            grpc_address=f"127.0.0.1:{self.ports.grpc}",
        )
