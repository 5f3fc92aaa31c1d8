"""The partition of a key, as Kafka's Java clients and librdkafka's murmur2 partitioner
compute it: (murmur2(key) & 0x7fffffff) mod the partition count."""

from __future__ import annotations

_MASK = 0xFFFFFFFF
_M = 0x5BD1E995


def murmur2(data: bytes) -> int:
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
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions
