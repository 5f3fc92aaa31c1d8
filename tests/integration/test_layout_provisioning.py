"""`cronlog provision` keeps a deployment's partition layout (issue 34): topics of another
Kafka partition count, or a Postgres already used with another logical partition count,
are refused with how to migrate, before anything is written; a database nothing has used
yet takes the configured count."""

from __future__ import annotations

import psycopg
import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config
from cronlog.infra.kafka.topics import TopicSetupError, require_layout
from cronlog.infra.postgres.connection import LayoutMismatch
from cronlog.infra.provision import provision, run_provision
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration


def _rows(settings: Settings) -> list[int]:
    with psycopg.connect(settings.postgres_dsn) as conn:
        return [int(p) for (p,) in conn.execute(
            "SELECT partition FROM partition_owners ORDER BY partition")]


def _topics(settings: Settings) -> dict[str, int]:
    found = AdminClient(admin_config(settings)).list_topics(timeout=30).topics
    return {name: len(t.partitions) for name, t in found.items()
            if name.startswith(settings.topic_prefix)}


def test_a_layout_is_provisioned_as_k_kafka_and_l_logical_partitions(isolated: Settings) -> None:
    # make_isolated set the schema up for the shared stack's count; nothing used it yet.
    settings = isolated.with_overrides(partitions=64, kafka_partitions=8)
    provision(settings)
    # Every job-keyed topic; the workers topic is keyed by worker, one partition.
    topics = _topics(settings)
    assert topics.pop(settings.workers_topic) == 1
    assert set(topics.values()) == {8}
    assert _rows(settings) == list(range(64))


def test_topics_of_another_kafka_partition_count_are_refused_before_anything_is_created(
        isolated: Settings) -> None:
    admin = AdminClient(admin_config(isolated))
    admin.create_topics([NewTopic(isolated.job_events_topic, 4, 1)])[
        isolated.job_events_topic].result(timeout=30)
    # As an existing deployment's would be: in the metadata.
    wait_for(lambda: isolated.job_events_topic in _topics(isolated), 30, "the topic listed")
    settings = isolated.with_overrides(partitions=64, kafka_partitions=8)
    with pytest.raises(TopicSetupError, match=f"topic {settings.job_events_topic} has 4 "
                                              "partitions, expected 8 .*replaying the log"):
        provision(settings)
    assert _topics(settings) == {settings.job_events_topic: 4}, "no other topic created"
    # Nor does a scheduler start on them.
    with pytest.raises(TopicSetupError, match=f"topic {settings.job_events_topic} has 4 "):
        require_layout(settings)


def test_a_database_used_with_another_logical_count_is_refused_with_how_to_migrate(
        isolated: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    provision(isolated)
    with psycopg.connect(isolated.postgres_dsn) as conn:
        conn.execute("UPDATE partition_owners SET epoch = 5 WHERE partition = 0")
    before = _topics(isolated)
    relaid = isolated.with_overrides(partitions=4 * isolated.partitions,
                                     topic_prefix=isolated.topic_prefix + "relaid.")
    with pytest.raises(LayoutMismatch, match=f"Postgres holds epochs for {isolated.partitions} "
                                             "logical partitions.*replay the log"):
        provision(relaid)
    assert _topics(relaid) == {}, "no topic of the new layout created"
    assert _rows(isolated) == list(range(isolated.partitions)), "the rows are as they were"
    assert run_provision(relaid, print_only=False) == 1
    assert "cannot change in place" in capsys.readouterr().err
    assert _topics(isolated) == before
