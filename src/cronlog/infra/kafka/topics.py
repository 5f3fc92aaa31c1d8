"""Creates cronlog's topics: every job-keyed topic has the same partition count."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config


class TopicSetupError(RuntimeError):
    """A topic could not be created or has the wrong partition count."""


def core_topics(settings: Settings) -> list[str]:
    return [settings.inbox_topic, settings.job_events_topic, settings.run_events_topic,
            settings.replies_topic, settings.dead_letters_topic, settings.alerts_topic,
            settings.poison_topic]


def ensure_topics(settings: Settings, names: Iterable[str], replication_factor: int = 1) -> None:
    admin = AdminClient(admin_config(settings))
    wanted = list(dict.fromkeys(names))
    existing = admin.list_topics(timeout=30).topics
    missing = [n for n in wanted if n not in existing]
    if missing:
        futures = admin.create_topics(
            [NewTopic(n, num_partitions=settings.partitions, replication_factor=replication_factor)
             for n in missing],
            operation_timeout=30,
        )
        for name, future in futures.items():
            try:
                future.result(timeout=60)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise TopicSetupError(f"creating topic {name}: {exc}") from exc
    # A new topic can take a moment to show in metadata.
    deadline = time.monotonic() + 30
    metadata = admin.list_topics(timeout=30).topics
    while any(n not in metadata for n in wanted) and time.monotonic() < deadline:
        time.sleep(0.2)
        metadata = admin.list_topics(timeout=30).topics
    for name in wanted:
        topic = metadata.get(name)
        if topic is None:
            raise TopicSetupError(f"topic {name} does not exist after creation")
        if len(topic.partitions) != settings.partitions:
            # Partition p of every job-keyed topic must belong to the same owner.
            raise TopicSetupError(
                f"topic {name} has {len(topic.partitions)} partitions, expected {settings.partitions}"
            )


def ensure_core_topics(settings: Settings) -> None:
    """The shared topics and the dispatch topic of every declared queue: the only place
    cronlog creates topics (requests never do; see commands/queue_catalog.py)."""
    ensure_topics(settings, [*core_topics(settings),
                             *(settings.dispatch_topic(q) for q in settings.queues)])


def require_dispatch_topics(settings: Settings, queues: Iterable[str]) -> None:
    """Refuses to start a process for queues whose dispatch topics were never provisioned:
    an owner could not dispatch to them, a worker would wait on nothing."""
    queues = list(queues)
    undeclared = [q for q in queues if q not in settings.queues]
    if undeclared:
        raise TopicSetupError(f"queues {', '.join(undeclared)} are not declared in "
                              f"CRONLOG_QUEUES ({', '.join(settings.queues)})")
    existing = AdminClient(admin_config(settings)).list_topics(timeout=30).topics
    missing = [q for q in queues if settings.dispatch_topic(q) not in existing]
    if missing:
        raise TopicSetupError(
            f"no dispatch topic for declared queues {', '.join(missing)}: run `cronlog "
            "provision` with the same CRONLOG_QUEUES before starting the api or workers")
