"""Creates cronlog's topics from their specs (topic_specs.py) and checks existing ones:
every job-keyed topic has the same partition count."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.cimpl import NewTopic

from cronlog.infra.config import Settings
from cronlog.infra.kafka.client_config import admin_config
from cronlog.infra.kafka.topic_specs import TopicSpec, check_existing, layout_refusal, topic_specs

log = logging.getLogger(__name__)


class TopicSetupError(RuntimeError):
    """A topic could not be created, or an existing one differs from its spec in a way only
    an operator can change (partitions, replication factor)."""


def core_topics(settings: Settings) -> list[str]:
    return [settings.inbox_topic, settings.job_events_topic, settings.run_events_topic,
            settings.replies_topic, settings.dead_letters_topic, settings.alerts_topic,
            settings.poison_topic, settings.alert_deliveries_topic]


def _create(admin: AdminClient, specs: list[TopicSpec]) -> list[str]:
    if not specs:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, num_partitions=s.partitions, replication_factor=s.replication_factor,
                  config=s.configs()) for s in specs],
        operation_timeout=30,
    )
    created = []
    for name, future in futures.items():
        try:
            future.result(timeout=60)
            created.append(f"created topic {name}")
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicSetupError(f"creating topic {name}: {exc}") from exc
    return created


def _configs(admin: AdminClient, names: list[str],
             deadline: float) -> dict[str, dict[str, str | None]]:
    """The topics' configs. On a cluster the broker asked may not know a topic created a
    moment ago on another (UNKNOWN_TOPIC_OR_PART, seen on a fresh 3-node cluster): asked
    again until `deadline` (monotonic), then the error is raised."""
    while True:
        futures = admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, n) for n in names], request_timeout=30)
        try:
            return {resource.name: {k: entry.value
                                    for k, entry in future.result(timeout=60).items()}
                    for resource, future in futures.items()}
        except KafkaException as exc:
            if (exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART
                    or time.monotonic() >= deadline):
                raise
        time.sleep(0.2)


def _alter(admin: AdminClient, name: str, changes: dict[str, str]) -> None:
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in changes.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            raise TopicSetupError(f"altering topic {name} ({changes}): {exc}") from exc


def ensure_topics(settings: Settings, specs: Iterable[TopicSpec]) -> list[str]:
    """Creates the missing topics as their specs say; on existing ones alters what is safe
    to alter (longer retention, higher min.insync.replicas, delete cleanup) and refuses
    what is not (fewer partitions or replicas than configured). Returns what it did and
    noticed, a line each."""
    admin = AdminClient(admin_config(settings))
    wanted = {s.name: s for s in specs}
    existing = admin.list_topics(timeout=30).topics
    # Topics of another layout (another partition count) are refused before anything is
    # created: half a layout's topics beside the other half's would be worse than none.
    layout = [r for n, s in wanted.items() if n in existing
              if (r := layout_refusal(s, len(existing[n].partitions))) is not None]
    if layout:
        raise TopicSetupError("; ".join(layout))
    report = _create(admin, [s for n, s in wanted.items() if n not in existing])
    # A new topic can take a moment to show in metadata.
    deadline = time.monotonic() + 30
    metadata = admin.list_topics(timeout=30).topics
    while any(n not in metadata for n in wanted) and time.monotonic() < deadline:
        time.sleep(0.2)
        metadata = admin.list_topics(timeout=30).topics
    absent = [n for n in wanted if n not in metadata]
    if absent:
        raise TopicSetupError(f"topics {', '.join(absent)} do not exist after creation")
    configs = _configs(admin, list(wanted), deadline)
    refusals: list[str] = []
    for name, spec in wanted.items():
        partitions = metadata[name].partitions
        replicas = min((len(p.replicas) for p in partitions.values()), default=0)
        check = check_existing(spec, len(partitions), replicas, configs.get(name, {}))
        if check.alter:
            _alter(admin, name, check.alter)
        report += check.notes
        refusals += check.refusals
    if refusals:
        raise TopicSetupError("; ".join(refusals))
    return report


def ensure_core_topics(settings: Settings) -> list[str]:
    """The shared topics and the dispatch topic of every declared queue: the only place
    cronlog creates topics (requests never do; see commands/queue_catalog.py)."""
    return ensure_topics(settings, topic_specs(settings))


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
    _refuse_another_layout(settings, existing, [settings.dispatch_topic(q) for q in queues])


def require_layout(settings: Settings) -> None:
    """Refuses to start a scheduler on topics of another partition count than the layout's
    K: its Kafka partitions would not be the ones the logical partitions live in. A broker
    out of reach is not a refusal: the scheduler starts and waits for Kafka as before, and
    the group assigns no partition the topics do not have."""
    try:
        existing = AdminClient(admin_config(settings)).list_topics(timeout=30).topics
    except KafkaException as exc:
        log.warning("could not check the topics' partition counts (%s); starting anyway", exc)
        return
    _refuse_another_layout(settings, existing, [
        settings.inbox_topic, settings.job_events_topic, settings.run_events_topic])


def _refuse_another_layout(settings: Settings, existing: Mapping[str, Any],
                           names: Iterable[str]) -> None:
    specs = {s.name: s for s in topic_specs(settings)}
    refusals = [r for n in names if n in existing and n in specs
                if (r := layout_refusal(specs[n], len(existing[n].partitions))) is not None]
    if refusals:
        raise TopicSetupError("; ".join(refusals))
