"""CRONLOG_PARTITIONS and CRONLOG_KAFKA_PARTITIONS: the layout, refused at configuration
when it cannot hold (issue 34)."""

from __future__ import annotations

import pytest

from cronlog.domain.partition_layout import PartitionLayout
from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.kafka.topic_specs import check_existing, topic_specs


def test_by_default_every_logical_partition_is_its_own_kafka_partition() -> None:
    assert Settings(partitions=12).layout == PartitionLayout(12, 12)
    assert settings_from_env({"CRONLOG_PARTITIONS": "16"}).layout == PartitionLayout(16, 16)


def test_the_kafka_partition_count_is_read_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_PARTITIONS": "1024", "CRONLOG_KAFKA_PARTITIONS": "64"})
    assert settings.layout == PartitionLayout(1024, 64)
    # The workers topic is keyed by worker, not by job: one partition (docs/workers.md).
    assert {s.partitions for s in topic_specs(settings)
            if s.kind != "workers"} == {64}, "every job-keyed topic has K"


def test_a_kafka_count_that_does_not_divide_the_logical_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"CRONLOG_PARTITIONS=64, CRONLOG_KAFKA_PARTITIONS=48: "
                                          r".*must divide the logical count"):
        settings_from_env({"CRONLOG_PARTITIONS": "64", "CRONLOG_KAFKA_PARTITIONS": "48"})
    with pytest.raises(ConfigError, match="must divide"):
        Settings(partitions=8, kafka_partitions=16)
    with pytest.raises(ConfigError, match="CRONLOG_KAFKA_PARTITIONS: must be positive"):
        settings_from_env({"CRONLOG_KAFKA_PARTITIONS": "0"})


def test_an_existing_topic_of_another_layout_is_refused_with_how_to_migrate() -> None:
    settings = Settings(partitions=64, kafka_partitions=8)
    spec = topic_specs(settings)[0]
    check = check_existing(spec, 64, 1, {})
    assert len(check.refusals) == 1
    assert "has 64 partitions, expected 8 (CRONLOG_KAFKA_PARTITIONS" in check.refusals[0]
    assert "replaying the log into new topics" in check.refusals[0]
