"""The partition layout: L logical partitions, the unit of ownership, laid over K Kafka
partitions per topic (docs/partitions.md).

A logical partition is what an owner leases (its epoch in Postgres), what the due index
and every projection row is keyed by, and the shard key beyond one machine. A Kafka
partition is what the consumer groups assign and what a transaction touches: K is chosen
for throughput (issue 34: the cost of a run grew with the number of Kafka partitions, not
with the number of leases). K divides L, so a key's Kafka partition is its logical
partition mod K: murmur2(key) mod L mod K = murmur2(key) mod K whenever K divides L, and
the producers' own murmur2 partitioner keeps putting a job's records where its owner reads
them, with no code at the producers.

Pure arithmetic: no I/O, nothing read from the environment.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

_MASK = 0xFFFFFFFF
_M = 0x5BD1E995


def murmur2(data: bytes) -> int:
    """Kafka's murmur2, as its Java clients and librdkafka's murmur2 partitioner compute it
    (checked against a broker in tests/integration/test_kafka_partitioner.py)."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length - length % 4
    rest = length % 4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(key: str, partitions: int) -> int:
    """(murmur2(key) & 0x7fffffff) mod the partition count: the producers' partitioner."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


# A job's records come in runs (its fire advance, its run's events, their dispatch): about
# 4 µs of murmur2 in Python each, 0.15 µs remembered. 65,536 keys is a few MB.
@lru_cache(maxsize=1 << 16)
def _remembered(key: str, partitions: int) -> int:
    return partition_for(key, partitions)


class LayoutError(ValueError):
    """A logical and a Kafka partition count that cannot be laid over each other."""


@dataclass(frozen=True)
class PartitionLayout:
    """`logical` partitions (L) over `kafka` partitions per topic (K); K divides L.

    Logical partition l lives in Kafka partition l mod K, so Kafka partition k holds the
    L/K logical partitions k, k + K, k + 2K, ...; the first of them, k itself, is the Kafka
    partition's anchor (its row holds the Kafka partition's applied offsets and fences its
    writes, docs/partitions.md). With K = L the layout is the identity: every logical
    partition is the Kafka partition of the same number, as before the layout existed.
    """

    logical: int
    kafka: int

    def __post_init__(self) -> None:
        if self.logical < 1:
            raise LayoutError(f"the logical partition count must be positive, got "
                              f"{self.logical}")
        if self.kafka < 1:
            raise LayoutError(f"the Kafka partition count must be positive, got {self.kafka}")
        if self.kafka > self.logical or self.logical % self.kafka:
            raise LayoutError(
                f"{self.kafka} Kafka partitions cannot carry {self.logical} logical "
                f"partitions: the Kafka partition count must divide the logical count "
                f"(powers of two, such as 64 of 1,024, can be changed later to any other "
                f"power of two up to the logical count)")

    @classmethod
    def identity(cls, partitions: int) -> PartitionLayout:
        return cls(partitions, partitions)

    @property
    def is_identity(self) -> bool:
        return self.logical == self.kafka

    @property
    def per_kafka(self) -> int:
        """How many logical partitions each Kafka partition carries."""
        return self.logical // self.kafka

    def kafka_of(self, logical: int) -> int:
        self._check_logical(logical)
        return logical % self.kafka

    def logicals_of(self, kafka: int) -> range:
        """The logical partitions of a Kafka partition, its anchor first."""
        self._check_kafka(kafka)
        return range(kafka, self.logical, self.kafka)

    def logicals_of_all(self, kafka: Iterable[int]) -> list[int]:
        """The logical partitions of several Kafka partitions, in order."""
        return sorted(lo for k in set(kafka) for lo in self.logicals_of(k))

    def anchor(self, kafka: int) -> int:
        """The logical partition whose row stands for the Kafka partition (its first)."""
        self._check_kafka(kafka)
        return kafka

    def logical_of(self, key: str) -> int:
        """The logical partition of a record key (a job's or a calendar's id)."""
        return _remembered(key, self.logical)

    def kafka_of_key(self, key: str) -> int:
        return partition_for(key, self.kafka)

    def logical_of_message(self, kafka: int, key: str | None) -> int:
        """The logical partition of a record read from Kafka partition `kafka`: no hashing
        with the identity layout. A record without key stays at the anchor."""
        if self.is_identity or key is None:
            return kafka
        return _remembered(key, self.logical)

    def _check_logical(self, logical: int) -> None:
        if not 0 <= logical < self.logical:
            raise LayoutError(f"logical partition {logical} is not in 0..{self.logical - 1}")

    def _check_kafka(self, kafka: int) -> None:
        if not 0 <= kafka < self.kafka:
            raise LayoutError(f"Kafka partition {kafka} is not in 0..{self.kafka - 1}")
