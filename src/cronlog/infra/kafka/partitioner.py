"""The partition of a key, as Kafka's Java clients and librdkafka's murmur2 partitioner
compute it: (murmur2(key) & 0x7fffffff) mod the partition count. The arithmetic is pure and
lives with the partition layout in the domain (domain/partition_layout.py); this module
keeps the name the adapters and tests import."""

from __future__ import annotations

from cronlog.domain.partition_layout import murmur2, partition_for

__all__ = ["murmur2", "partition_for"]
