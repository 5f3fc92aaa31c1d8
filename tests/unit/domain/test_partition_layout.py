"""The partition layout: L logical partitions over K Kafka partitions (issue 34)."""

from __future__ import annotations

import uuid

import pytest

from cronlog.domain.partition_layout import LayoutError, PartitionLayout, partition_for


def test_a_logical_partition_lives_in_its_number_mod_k() -> None:
    layout = PartitionLayout(1024, 64)
    assert layout.per_kafka == 16
    assert layout.kafka_of(0) == 0 and layout.kafka_of(64) == 0 and layout.kafka_of(1023) == 63
    assert list(layout.logicals_of(3)) == [3 + 64 * i for i in range(16)]
    assert layout.anchor(3) == 3 == layout.logicals_of(3)[0]
    assert layout.logicals_of_all([1, 0]) == sorted([*range(0, 1024, 64), *range(1, 1024, 64)])


def test_every_logical_partition_is_in_exactly_one_kafka_partition() -> None:
    layout = PartitionLayout(64, 8)
    seen = [lo for k in range(8) for lo in layout.logicals_of(k)]
    assert sorted(seen) == list(range(64))


@pytest.mark.parametrize(("logical", "kafka"), [(1024, 64), (64, 8), (8, 8), (12, 4), (8, 1)])
def test_the_producers_partitioner_puts_a_key_in_the_kafka_partition_of_its_logical_one(
        logical: int, kafka: int) -> None:
    # What lets producers keep their murmur2 partitioner, keyed by job id, unchanged.
    layout = PartitionLayout(logical, kafka)
    for _ in range(2000):
        key = str(uuid.uuid4())
        assert layout.kafka_of(layout.logical_of(key)) == partition_for(key, kafka) \
            == layout.kafka_of_key(key)


def test_the_identity_layout_is_the_layout_before_issue_34() -> None:
    layout = PartitionLayout.identity(8)
    assert layout.is_identity and list(layout.logicals_of(5)) == [5]
    key = str(uuid.uuid4())
    assert layout.logical_of(key) == partition_for(key, 8)
    # Nothing hashed: a record read from Kafka partition 5 is of logical partition 5.
    assert layout.logical_of_message(5, key) == 5


def test_a_record_read_from_kafka_is_of_its_keys_logical_partition() -> None:
    layout = PartitionLayout(64, 8)
    key = str(uuid.uuid4())
    logical = layout.logical_of(key)
    assert layout.logical_of_message(logical % 8, key) == logical
    assert layout.logical_of_message(3, None) == 3, "no key: the anchor"


@pytest.mark.parametrize(("logical", "kafka", "said"), [
    (64, 6, "must divide the logical count"),
    (8, 16, "must divide the logical count"),
    (0, 1, "logical partition count must be positive"),
    (8, 0, "Kafka partition count must be positive"),
])
def test_layouts_that_cannot_hold_are_refused_naming_why(logical: int, kafka: int,
                                                          said: str) -> None:
    with pytest.raises(LayoutError, match=said):
        PartitionLayout(logical, kafka)


def test_partitions_out_of_range_are_refused() -> None:
    layout = PartitionLayout(16, 4)
    with pytest.raises(LayoutError, match=r"Kafka partition 4 is not in 0\.\.3"):
        layout.logicals_of(4)
    with pytest.raises(LayoutError, match=r"logical partition 16 is not in 0\.\.15"):
        layout.kafka_of(16)
