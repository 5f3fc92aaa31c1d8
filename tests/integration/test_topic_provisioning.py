"""`cronlog provision` against the real broker: topics created as their specs say, existing
ones with too short a retention lengthened and reported, and fewer partitions or replicas
than configured refused by name."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config
from cronlog.infra.kafka.topic_specs import topic_specs
from cronlog.infra.kafka.topics import TopicSetupError, ensure_core_topics
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration
DAY_MS = 86_400_000


def topic_configs(settings: Settings, names: list[str]) -> dict[str, dict[str, str]]:
    admin = AdminClient(admin_config(settings))
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names])
    return {r.name: {k: e.value for k, e in f.result(timeout=30).items()}
            for r, f in futures.items()}


def create(settings: Settings, name: str, partitions: int, **config: str) -> None:
    admin = AdminClient(admin_config(settings))
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(timeout=30)


def test_topics_are_created_with_their_retention_and_min_isr(isolated: Settings) -> None:
    report = ensure_core_topics(isolated)
    specs = topic_specs(isolated)
    assert sorted(report) == sorted(f"created topic {s.name}" for s in specs)
    configs = topic_configs(isolated, [s.name for s in specs])
    assert configs[isolated.job_events_topic]["retention.ms"] == "-1"
    assert configs[isolated.run_events_topic]["retention.ms"] == str(97 * DAY_MS)
    assert configs[isolated.dispatch_topic("default")]["retention.ms"] == str(90 * DAY_MS)
    assert configs[isolated.replies_topic]["retention.ms"] == str(DAY_MS)
    for spec in specs:
        assert configs[spec.name]["min.insync.replicas"] == str(isolated.topic_min_insync_replicas)
        assert configs[spec.name]["cleanup.policy"] == spec.cleanup_policy
    # Each worker's newest announcement (docs/workers.md); every other topic is a log.
    assert {s.name for s in specs if s.cleanup_policy != "delete"} == {isolated.workers_topic}
    assert configs[isolated.workers_topic]["cleanup.policy"] == "compact,delete"
    assert ensure_core_topics(isolated) == [], "provisioning again changes nothing"


def test_an_existing_topic_kept_too_briefly_is_lengthened_and_reported(
        isolated: Settings) -> None:
    create(isolated, isolated.run_events_topic, isolated.partitions,
           **{"retention.ms": str(7 * DAY_MS), "cleanup.policy": "compact"})
    report = ensure_core_topics(isolated)
    assert (f"topic {isolated.run_events_topic}: retention {7 * DAY_MS} ms is shorter than the "
            f"97 days required; set retention.ms={97 * DAY_MS}") in report
    assert f"topic {isolated.run_events_topic}: cleanup.policy compact replaced by delete" \
        in report

    def altered() -> bool:
        configs = topic_configs(isolated, [isolated.run_events_topic])[isolated.run_events_topic]
        return (configs["retention.ms"], configs["cleanup.policy"]) == (str(97 * DAY_MS),
                                                                        "delete")

    # The controller applies the change; the broker's answer follows it shortly after.
    wait_for(altered, 15, "the run events topic altered")


def test_an_existing_topic_kept_longer_is_left_alone(isolated: Settings) -> None:
    create(isolated, isolated.inbox_topic, isolated.partitions, **{"retention.ms": "-1"})
    report = ensure_core_topics(isolated)
    assert any(line.startswith(f"topic {isolated.inbox_topic}: retention forever is longer")
               for line in report), report
    configs = topic_configs(isolated, [isolated.inbox_topic])[isolated.inbox_topic]
    assert configs["retention.ms"] == "-1"


def test_fewer_replicas_than_configured_are_refused(isolated: Settings) -> None:
    ensure_core_topics(isolated)
    wanting_more = isolated.with_overrides(topic_replication_factor=2)
    with pytest.raises(TopicSetupError,
                       match=f"topic {isolated.inbox_topic} has replication factor 1, expected 2 "
                             r"\(CRONLOG_TOPIC_REPLICATION_FACTOR\)"):
        ensure_core_topics(wanting_more)


def test_another_partition_count_is_refused(isolated: Settings) -> None:
    create(isolated, isolated.job_events_topic, isolated.partitions + 1)
    with pytest.raises(TopicSetupError,
                       match=f"topic {isolated.job_events_topic} has {isolated.partitions + 1} "
                             f"partitions, expected {isolated.partitions}"):
        ensure_core_topics(isolated)
