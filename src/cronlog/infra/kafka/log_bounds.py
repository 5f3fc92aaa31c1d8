"""The bounds of many partitions' logs in one request per broker."""

from __future__ import annotations

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    OffsetSpec,
)

TopicPartitionKey = tuple[str, int]


def log_bounds(admin: AdminClient, keys: list[TopicPartitionKey]
               ) -> dict[TopicPartitionKey, tuple[int, int]]:
    """(first offset, last stable offset) of each partition, in one request per broker and
    bound: asked one by one, each partition is a round trip, which at a thousand partitions
    is most of a takeover (docs/benchmarks.md, "Takeover")."""
    wanted = [TopicPartition(t, p) for t, p in keys]
    bounds: dict[TopicPartitionKey, list[int]] = {}
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]
        answers = admin.list_offsets({tp: spec for tp in wanted},
                                     isolation_level=IsolationLevel.READ_COMMITTED,
                                     request_timeout=10)
        for tp, future in answers.items():
            bounds.setdefault((tp.topic, tp.partition), []).append(
                int(future.result(timeout=15).offset))
    return {key: (low, high) for key, (low, high) in bounds.items()}
