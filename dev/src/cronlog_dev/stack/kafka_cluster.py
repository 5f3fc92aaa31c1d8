"""A local Kafka cluster: N KRaft nodes on loopback, each broker and controller in its own
process with its own ports and data folder, every one a voter of the controller quorum.

Node i (1-based) listens on `port + 10 * (i - 1)` and `controller_port + 10 * (i - 1)`, so
node 1 has the ports a single broker would have and the stacks' port sets (`make run`,
`make test` and its shifted copies) stay apart. Chaos tests kill and restart single nodes;
cluster_view.py tells which node leads what."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cronlog_dev.stack.kafka_broker import (
    KafkaBroker,
    KafkaExited,
    _resource,
    install_kafka_jars,
    new_cluster_id,
)
from cronlog_dev.stack.parallel import all_at_once
from cronlog_dev.stack.process import StackError, stop_pidfile, wait_until

PORT_STEP = 10
# How often a node is started again when its port was briefly held by someone else.
BIND_ATTEMPTS = 5
# Three voters survive one lost node; a copy on every node, two of them needed for a write.
MAX_REPLICATION = 3
NODE_HEAP_MB = 512


def kafka_brokers_from_env(default: int = 1) -> int:
    """CRONLOG_KAFKA_BROKERS: how many Kafka nodes the local stack starts."""
    raw = os.environ.get("CRONLOG_KAFKA_BROKERS", "").strip()
    if not raw:
        return default
    try:
        brokers = int(raw)
    except ValueError:
        raise StackError(f"CRONLOG_KAFKA_BROKERS must be a whole number, got {raw!r}") from None
    if not 1 <= brokers <= 9:
        raise StackError(f"CRONLOG_KAFKA_BROKERS must be from 1 to 9, got {brokers}")
    return brokers


def replication_for(brokers: int) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) for topics on a cluster of that size."""
    replication = min(brokers, MAX_REPLICATION)
    return replication, max(1, replication - 1)


@dataclass(frozen=True)
class QuorumState:
    """The controller quorum as the live nodes last recorded it."""

    leader: int | None  # None: an election is under way
    epoch: int
    voters: tuple[int, ...]


@dataclass
class KafkaNode(KafkaBroker):
    node_id: int = 1
    voters: str = ""
    replication: int = 1
    min_isr: int = 1

    def quorum_state(self) -> QuorumState | None:
        """This node's persisted view of the quorum: leader, epoch and voters (the raft
        layer rewrites the file on every election it learns of)."""
        path = self.state_dir / "kafka-data" / "__cluster_metadata-0" / "quorum-state"
        try:
            state = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return None
        leader = state.get("leaderId", -1)
        return QuorumState(leader if isinstance(leader, int) and leader >= 0 else None,
                           int(state.get("leaderEpoch", -1)),
                           tuple(sorted(v["voterId"] for v in state.get("currentVoters", ()))))

    def _properties(self, data: Path) -> str:
        return _resource("kafka-cluster-node.properties").format(
            node_id=self.node_id, voters=self.voters, port=self.port,
            controller_port=self.controller_port, log_dir=data, partitions=self.partitions,
            replication=self.replication, min_isr=self.min_isr,
        )


@dataclass
class KafkaCluster:
    state_dir: Path
    port: int
    controller_port: int
    brokers: int = 3
    partitions: int = 8
    optimising_jit: bool = False  # KafkaBroker's
    nodes: dict[int, KafkaNode] = field(init=False)

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise StackError(f"a Kafka cluster needs at least one node, got {self.brokers}")
        replication, min_isr = replication_for(self.brokers)
        ids = range(1, self.brokers + 1)
        voters = ",".join(f"{i}@127.0.0.1:{self._controller_port(i)}" for i in ids)
        self.nodes = {
            i: KafkaNode(self.state_dir / f"node-{i}", self.port + PORT_STEP * (i - 1),
                         self._controller_port(i), self.partitions, heap_mb=NODE_HEAP_MB,
                         optimising_jit=self.optimising_jit, node_id=i, voters=voters,
                         replication=replication, min_isr=min_isr)
            for i in ids}

    def _controller_port(self, node_id: int) -> int:
        return self.controller_port + PORT_STEP * (node_id - 1)

    @property
    def replication(self) -> int:
        return replication_for(self.brokers)[0]

    @property
    def min_insync_replicas(self) -> int:
        return replication_for(self.brokers)[1]

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    @property
    def addresses(self) -> list[str]:
        return [node.bootstrap for node in self.nodes.values()]

    def _cluster_id(self) -> str:
        # Every node's storage must carry the same id; kept so a restart formats none anew.
        path = self.state_dir / "cluster-id"
        if not path.exists():
            self.state_dir.mkdir(parents=True, exist_ok=True)
            path.write_text(new_cluster_id())
        return path.read_text().strip()

    def start(self, timeout: float = 120) -> None:
        """Starts every node and waits until each is registered and unfenced."""
        self.stop()
        cluster_id = self._cluster_id()
        # Once, before the nodes: each would otherwise wait on the install lock in turn.
        install_kafka_jars()
        # Formatting is a JVM start per node: in parallel it costs one.
        all_at_once(lambda node: node.launch(cluster_id), self.nodes.values(), self.stop)
        try:
            for node in self.nodes.values():
                self._wait_bound(node, cluster_id, timeout)
            self.wait_registered(timeout)
        except BaseException:
            self.stop()
            raise

    def wait_registered(self, timeout: float = 60, brokers: int | None = None) -> None:
        """Until the cluster's metadata lists `brokers` (default: every node) as live."""
        from cronlog_dev.stack.cluster_view import ClusterView

        want = self.brokers if brokers is None else brokers
        view = ClusterView(self.bootstrap)
        wait_until(lambda: len(view.live_brokers()) >= want, timeout,
                   f"{want} Kafka brokers registered at {self.bootstrap}",
                   self.nodes[1].log)

    def kill(self, node_id: int) -> None:
        self.nodes[node_id].kill()

    def restart(self, node_id: int, timeout: float = 90) -> None:
        """Starts a stopped or killed node again with its data, and waits for it to serve."""
        node = self.nodes[node_id]
        node.launch(self._cluster_id())
        self._wait_bound(node, self._cluster_id(), timeout)
        self.wait_registered(timeout)

    @staticmethod
    def _wait_bound(node: KafkaNode, cluster_id: str, timeout: float) -> None:
        """Waits for the node to serve, starting it again if its port was taken. A client
        retrying a dead node on loopback can connect to itself when the kernel hands it the
        node's port as its own ephemeral port (a TCP self-connect), and holds the port for
        a moment; test ports sit below the ephemeral range, `make run`'s may not."""
        for attempt in range(1, BIND_ATTEMPTS + 1):
            try:
                node.wait_ready(timeout)
                return
            except KafkaExited as exc:
                if "Address already in use" not in str(exc) or attempt == BIND_ATTEMPTS:
                    raise
            time.sleep(1.0)
            node.launch(cluster_id)

    def quorum(self) -> QuorumState:
        """The newest quorum state among the running nodes. librdkafka cannot tell: its
        DescribeCluster names a random broker as `controller` on a KRaft cluster (KIP-590),
        and it has no DescribeQuorum."""
        states = [s for i in self.running() if (s := self.nodes[i].quorum_state()) is not None]
        if not states:
            return QuorumState(None, -1, ())
        return max(states, key=lambda s: (s.epoch, s.leader is not None))

    def active_controller(self, timeout: float = 30) -> int:
        """The quorum leader's node id, once there is one that is running."""
        found: list[int] = []

        def elected() -> bool:
            leader = self.quorum().leader
            if leader is not None and leader in self.running():
                found.append(leader)
                return True
            return False
        wait_until(elected, timeout, "an active Kafka controller")
        return found[-1]

    def running(self) -> list[int]:
        return [i for i, node in self.nodes.items() if node.pid is not None]

    def stop(self) -> None:
        # Together: a node stopping alone waits for the controllers, and the last one left
        # has no quorum to wait for, so stopped one by one the last would time out.
        threads = [threading.Thread(target=node.stop, daemon=True)
                   for node in self.nodes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def stop_kafka_under(folder: Path) -> None:
    """Stops every Kafka process started under folder, single broker or cluster nodes: a
    stack stopped in the other mode than it was started in leaves none behind."""
    if folder.exists():
        for pidfile in folder.rglob("kafka.pid"):
            stop_pidfile(pidfile)
