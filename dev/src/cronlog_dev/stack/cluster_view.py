"""Who does what in a Kafka cluster, as its metadata tells: live brokers, partition leaders
and ISRs, and which broker coordinates a consumer group or a transactional id. For chaos
tests, which kill the broker that matters most."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode, as a signed 32-bit int (over UTF-16 code units)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The internal-topic partition whose leader coordinates a group or transactional id:
    Kafka's `Utils.abs(key.hashCode()) % partitions` (abs of MIN_VALUE is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(frozen=True)
class PartitionState:
    partition: int
    leader: int  # -1: none (every replica of the ISR is down)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterView:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._timeout = timeout

    # Metadata requests, which any live broker answers: librdkafka sends DescribeCluster and
    # DescribeTopics to the broker metadata names as controller, on KRaft a random one,
    # and they time out while that one is the broker a chaos test killed.
    def live_brokers(self) -> list[int]:
        """Brokers in the cluster's metadata (registered and not fenced); empty if unknown."""
        try:
            metadata = self._admin.list_topics(timeout=self._timeout)
        except KafkaException:
            return []
        return sorted(metadata.brokers)

    def partitions(self, topic: str) -> list[PartitionState]:
        metadata = self._admin.list_topics(topic, timeout=self._timeout).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        return sorted((PartitionState(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                       for p in metadata.partitions.values()), key=lambda s: s.partition)

    def leader_counts(self, topic: str) -> Counter[int]:
        """How many of the topic's partitions each broker leads."""
        return Counter(p.leader for p in self.partitions(topic) if p.leader >= 0)

    def fully_replicated(self, topic: str) -> bool:
        """Every partition has a leader and every replica back in its ISR."""
        try:
            states = self.partitions(topic)
        except KafkaException:
            return False
        return bool(states) and all(p.leader >= 0 and set(p.isr) == set(p.replicas)
                                    for p in states)

    def coordinator(self, internal_topic: str, key: str) -> int:
        states = self.partitions(internal_topic)
        return states[coordinator_partition(key, len(states))].leader

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The broker coordinating a transactional id: the leader of its __transaction_state
        partition (librdkafka's admin API has no DescribeTransactions)."""
        return self.coordinator(TRANSACTION_STATE_TOPIC, transactional_id)

    def group_coordinator(self, group: str) -> int:
        """The broker coordinating a consumer group, as the group itself reports it."""
        description = self._admin.describe_consumer_groups(
            [group], request_timeout=self._timeout)[group].result(timeout=self._timeout + 2)
        return int(description.coordinator.id)
