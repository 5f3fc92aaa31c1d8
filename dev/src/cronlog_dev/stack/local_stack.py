"""Brings up Kafka, PostgreSQL and ClickHouse on loopback under one state folder. Kafka is one
broker, or a cluster of CRONLOG_KAFKA_BROKERS KRaft nodes (kafka_cluster.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cronlog.infra.config import Settings
from cronlog_dev.stack.clickhouse_server import ClickHouseServer
from cronlog_dev.stack.kafka_broker import KafkaBroker
from cronlog_dev.stack.kafka_cluster import (
    KafkaCluster,
    kafka_brokers_from_env,
    replication_for,
    stop_kafka_under,
)
from cronlog_dev.stack.parallel import all_at_once
from cronlog_dev.stack.postgres_server import PostgresServer
from cronlog_dev.stack.secrets import stack_key_file, stack_secret


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
# Below Linux's ephemeral range (32768-60999), with every session's offset (up to +900):
# at 45932 a test session's PostgreSQL could not start, its port held as the local end of
# another session's client connection (CI, 6 December).
TEST_PORTS = StackPorts(21092, 21093, 22432, 24000, 24123, 25061)


# The test session's own 3-node cluster (tests that kill brokers), nodes 10 ports apart. Below
# Linux's ephemeral range (32768-60999): a client retrying a killed node can otherwise be
# handed that node's port as its own and connect to itself, and the node cannot restart.
TEST_CLUSTER_KAFKA_PORT = 28092
TEST_CLUSTER_CONTROLLER_PORT = 28093


def shifted(ports: StackPorts, offset: int) -> StackPorts:
    """The same ports moved by offset, so two test sessions on one machine do not meet."""
    return StackPorts(*(port + offset for port in (
        ports.kafka, ports.kafka_controller, ports.postgres, ports.clickhouse_tcp,
        ports.clickhouse_http, ports.grpc)))


class LocalStack:
    def __init__(self, state_dir: Path, ports: StackPorts, partitions: int = 8,
                 brokers: int | None = None, kafka_heap_mb: int | None = None,
                 kafka_optimising_jit: bool = False) -> None:
        """brokers: Kafka nodes to start; None reads CRONLOG_KAFKA_BROKERS (default 1).
        kafka_heap_mb: the single broker's heap; None keeps KafkaBroker's.
        kafka_optimising_jit: C2 as well as C1 (the bench; kafka_broker.QUICK_JIT)."""
        self.state_dir = state_dir
        self.ports = ports
        self.partitions = partitions
        self.brokers = kafka_brokers_from_env() if brokers is None else brokers
        self.kafka: KafkaBroker | KafkaCluster
        if self.brokers == 1:
            self.kafka = KafkaBroker(state_dir / "kafka", ports.kafka, ports.kafka_controller,
                                     partitions, optimising_jit=kafka_optimising_jit)
            if kafka_heap_mb is not None:
                self.kafka.heap_mb = kafka_heap_mb
        else:
            # Node 1 has the single broker's ports; the others follow 10 and 20 above.
            self.kafka = KafkaCluster(state_dir / "kafka", ports.kafka, ports.kafka_controller,
                                      self.brokers, partitions,
                                      optimising_jit=kafka_optimising_jit)
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
        stop_kafka_under(self.state_dir / "kafka")  # left by a start in the other mode
        servers: list[KafkaBroker | KafkaCluster | PostgresServer | ClickHouseServer] = [
            self.kafka, self.postgres, self.clickhouse]
        all_at_once(lambda server: server.start(), servers, self.stop)

    def stop(self) -> None:
        for server in (self.kafka, self.postgres, self.clickhouse):
            server.stop()
        # Nodes of a cluster started with another CRONLOG_KAFKA_BROKERS, if any.
        stop_kafka_under(self.state_dir / "kafka")

    @property
    def kafka_addresses(self) -> list[str]:
        return self.kafka.addresses if isinstance(self.kafka, KafkaCluster) \
            else [self.kafka.bootstrap]

    def settings(self, topic_prefix: str = "cronlog.") -> Settings:
        self._load_secrets()
        replication, min_insync = replication_for(self.brokers)
        # Webhook channels' secrets derive from it (issue 37): made once per state folder.
        signing_key = stack_key_file(self.state_dir)
        return Settings(
            topic_replication_factor=replication,
            topic_min_insync_replicas=min_insync,
            kafka_bootstrap=self.kafka.bootstrap,
            postgres_dsn=self.postgres.dsn,
            clickhouse_host="127.0.0.1",
            clickhouse_port=self.ports.clickhouse_tcp,
            clickhouse_user=self.clickhouse.user,
            clickhouse_password=self.clickhouse.password,
            clickhouse_users_dir=str(self.clickhouse.users_dir),
            topic_prefix=topic_prefix,
            partitions=self.partitions,
            grpc_address=f"127.0.0.1:{self.ports.grpc}",
            alert_signing_key_file=str(signing_key),
            alert_signing_key=signing_key.read_bytes(),
        )
