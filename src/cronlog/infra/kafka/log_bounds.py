"""The bounds of many partitions' logs in one request per broker."""

from __future__ import annotations

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    OffsetSpec,
)

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config

TopicPartitionKey = tuple[str, int]


class LogBounds:
    """Asked one by one, each partition is a round trip, which at a thousand partitions is
    most of a takeover (docs/benchmarks.md, "Takeover"); this asks for all at once."""

    def __init__(self, settings: Settings) -> None:
        self._config = admin_config(settings)
        self._admin: AdminClient | None = None

    def of(self, keys: list[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(first offset, last stable offset) of each partition. Raises KafkaException."""
        if not keys:
            return {}
        if self._admin is None:
            self._admin = AdminClient(self._config)
        try:
            return _bounds(self._admin, keys)
        except KafkaException:
            # After a broker restart the client's leader epochs are stale and its answers
            # stay FENCED_LEADER_EPOCH: the next call starts from fresh metadata.
            self._admin = None
            raise


def _bounds(admin: AdminClient, keys: list[TopicPartitionKey]
            ) -> dict[TopicPartitionKey, tuple[int, int]]:
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
