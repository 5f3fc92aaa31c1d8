"""Creates what a cronlog deployment needs before its processes start: topics (the shared
ones and the dispatch topic of every queue in CRONLOG_QUEUES) and schemas."""

from __future__ import annotations

from cronlog.infra.config import Settings
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.postgres.connection import ensure_schema


def provision(settings: Settings) -> None:
    from cronlog.infra.composition import build_run_history

    ensure_core_topics(settings)
    ensure_schema(settings.postgres_dsn, settings.partitions)
    build_run_history(settings).ensure_schema()
