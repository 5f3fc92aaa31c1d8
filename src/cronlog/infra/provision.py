"""Creates what a cronlog deployment needs before its processes start: topics (the shared
ones and the dispatch topic of every queue in CRONLOG_QUEUES, as topic_specs.py says) and
schemas; and the per-tenant analyst users of CRONLOG_ANALYSTS, when it is set
(clickhouse/analyst_access.py)."""

from __future__ import annotations

import sys

from cronlog.infra.config import Settings
from cronlog.infra.kafka.topic_specs import kafka_topics_commands, spec_table, topic_specs
from cronlog.infra.kafka.topics import ensure_core_topics
from cronlog.infra.postgres.connection import LayoutMismatch, check_layout, ensure_schema


def provision(settings: Settings) -> list[str]:
    """Returns what it did to the topics and what it noticed, a line each."""
    from cronlog.infra.clickhouse.analyst_access import AccessPlan, check, provision_analysts
    from cronlog.infra.composition import build_run_history

    history = build_run_history(settings)
    plan: AccessPlan | None = None
    if settings.analysts is not None:
        # Before anything is created: what cannot be done as configured is refused with
        # nothing changed.
        plan = check(settings, history, settings.analysts)
    # A database of another layout is refused before any topic is created.
    check_layout(settings.postgres_dsn, settings.partitions)
    report = ensure_core_topics(settings)
    ensure_schema(settings.postgres_dsn, settings.partitions)
    # The history's new columns first: the tenant copies below are then rebuilt with them.
    history.ensure_schema()
    if settings.analysts is not None and plan is not None:
        report += provision_analysts(settings, history, settings.analysts, plan)
    return report


def topic_plan(settings: Settings) -> list[str]:
    """`cronlog provision --print`: every topic as provision would create it, and the same
    as kafka-topics.sh commands; talks to no server."""
    specs = topic_specs(settings)
    return [*spec_table(specs), "", "# or by hand:",
            *kafka_topics_commands(specs, settings.kafka_bootstrap)]


def run_provision(settings: Settings, print_only: bool) -> int:
    from cronlog.infra.clickhouse.analyst_access import AnalystAccessError
    from cronlog.infra.clickhouse.run_history import HistoryStoreError
    from cronlog.infra.config import ConfigError
    from cronlog.infra.kafka.topics import TopicSetupError

    try:
        lines = topic_plan(settings) if print_only else provision(settings)
    except (ConfigError, TopicSetupError, AnalystAccessError, HistoryStoreError,
            LayoutMismatch) as exc:
        print(f"cronlog provision: error: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0
