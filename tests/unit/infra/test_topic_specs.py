"""The topic table: every topic, its retention by kind, and bad settings refused by name."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.kafka.log_gaps import Need, find_gap, horizon_start
from cronlog.infra.kafka.topic_specs import (
    TopicSpec,
    check_existing,
    kafka_topics_commands,
    spec_table,
    topic_specs,
)

DAY_MS = 86_400_000


def specs_by_kind(settings: Settings) -> dict[str, TopicSpec]:
    return {s.kind if s.kind != "dispatch" else s.name: s for s in topic_specs(settings)}


def test_every_topic_is_listed_with_the_configured_replication() -> None:
    settings = Settings(topic_prefix="p.", partitions=12, topic_replication_factor=3,
                        topic_min_insync_replicas=2, queues=("default", "batch"))
    specs = topic_specs(settings)
    assert [s.name for s in specs] == [
        "p.inbox", "p.job-events", "p.run-events", "p.replies", "p.dead-letters", "p.alerts",
        "p.poison", "p.alert-deliveries", "p.dispatch.default", "p.dispatch.batch",
        "p.workers"]
    assert {(s.partitions, s.replication_factor, s.min_insync_replicas, s.cleanup_policy)
            for s in specs[:-1]} == {(12, 3, 2, "delete")}
    assert all(s.configs()["min.insync.replicas"] == "2" for s in specs)


def test_the_workers_topic_keeps_each_workers_newest_announcement_for_a_day() -> None:
    workers = topic_specs(Settings(topic_prefix="p.", partitions=12, topic_replication_factor=3,
                                   topic_min_insync_replicas=2))[-1]
    # Read whole by every api: one partition, compacted, and a dead worker's record gone
    # within a day and an hour's segment.
    assert (workers.name, workers.partitions, workers.replication_factor) == ("p.workers", 1, 3)
    assert workers.configs() == {"retention.ms": str(DAY_MS), "min.insync.replicas": "2",
                                 "cleanup.policy": "compact,delete", "segment.ms": "3600000"}


def test_retention_defaults_keep_the_log_at_least_as_long_as_the_history() -> None:
    specs = specs_by_kind(Settings(history_retention=timedelta(days=90)))
    assert specs["job-events"].retention_ms == -1, "job events are kept forever"
    assert specs["run-events"].retention_ms == 97 * DAY_MS
    assert specs["cronlog.dispatch.default"].retention_ms == 90 * DAY_MS
    assert specs["inbox"].retention_ms == 7 * DAY_MS
    assert specs["replies"].retention_ms == DAY_MS
    for kind in ("dead-letters", "alerts", "poison", "alert-deliveries"):
        assert specs[kind].retention_ms == 90 * DAY_MS


def test_retention_comes_from_the_environment() -> None:
    settings = settings_from_env({"CRONLOG_HISTORY_RETENTION_DAYS": "30",
                                  "CRONLOG_JOB_EVENTS_RETENTION_DAYS": "3650",
                                  "CRONLOG_RUN_EVENTS_RETENTION_DAYS": "30",
                                  "CRONLOG_DISPATCH_RETENTION_DAYS": "45",
                                  "CRONLOG_INBOX_RETENTION_DAYS": "2"})
    specs = specs_by_kind(settings)
    assert specs["job-events"].retention_ms == 3650 * DAY_MS
    assert specs["run-events"].retention_ms == 30 * DAY_MS
    assert specs["cronlog.dispatch.default"].retention_ms == 45 * DAY_MS
    assert specs["inbox"].retention_ms == 2 * DAY_MS
    assert specs["alerts"].retention_ms == 30 * DAY_MS


@pytest.mark.parametrize("variable", ["JOB_EVENTS_RETENTION_DAYS", "RUN_EVENTS_RETENTION_DAYS",
                                      "DISPATCH_RETENTION_DAYS"])
def test_event_topics_kept_less_than_the_history_are_refused_by_name(variable: str) -> None:
    settings = settings_from_env({f"CRONLOG_{variable}": "89"})
    with pytest.raises(ConfigError, match=f"CRONLOG_{variable}: 89 days is less than the "
                                          r"history retention \(CRONLOG_HISTORY_RETENTION_DAYS"):
        topic_specs(settings)


def test_min_insync_replicas_above_the_replication_factor_is_refused() -> None:
    settings = settings_from_env({"CRONLOG_TOPIC_REPLICATION_FACTOR": "2",
                                  "CRONLOG_TOPIC_MIN_INSYNC_REPLICAS": "3"})
    with pytest.raises(ConfigError, match=r"CRONLOG_TOPIC_MIN_INSYNC_REPLICAS \(3\) is more "
                                          r"than CRONLOG_TOPIC_REPLICATION_FACTOR \(2\)"):
        topic_specs(settings)


def test_the_listing_and_the_commands_say_the_same() -> None:
    specs = topic_specs(Settings(topic_replication_factor=3, topic_min_insync_replicas=2))
    table = spec_table(specs)
    assert table[0].split() == ["topic", "partitions", "RF", "min", "ISR", "retention", "cleanup"]
    assert table[2].split() == ["cronlog.job-events", "8", "3", "2", "forever", "delete"]
    commands = kafka_topics_commands(specs, "kafka:9092")
    assert commands[1] == (
        "kafka-topics.sh --bootstrap-server kafka:9092 --create --topic cronlog.job-events "
        "--partitions 8 --replication-factor 3 --config retention.ms=-1 "
        "--config min.insync.replicas=2 --config cleanup.policy=delete")


RUN_EVENTS = topic_specs(Settings(topic_replication_factor=3, topic_min_insync_replicas=2))[2]


def test_an_existing_topic_as_specified_needs_nothing() -> None:
    check = check_existing(RUN_EVENTS, 8, 3, RUN_EVENTS.configs())
    assert (check.alter, check.notes, check.refusals) == ({}, [], [])


def test_short_retention_and_low_min_isr_are_altered_and_said() -> None:
    check = check_existing(RUN_EVENTS, 8, 3, {"retention.ms": str(7 * DAY_MS),
                                              "min.insync.replicas": "1",
                                              "cleanup.policy": "compact"})
    assert check.alter == {"retention.ms": str(97 * DAY_MS), "min.insync.replicas": "2",
                           "cleanup.policy": "delete"}
    assert check.refusals == []
    assert any("retention 604800000 ms is shorter than the 97 days required" in n
               for n in check.notes)


def test_longer_retention_and_more_replicas_are_left_alone() -> None:
    check = check_existing(RUN_EVENTS, 8, 5, {"retention.ms": "-1", "min.insync.replicas": "3",
                                              "cleanup.policy": "delete"})
    assert check.alter == {} and check.refusals == []
    assert len(check.notes) == 3


def test_fewer_partitions_or_replicas_are_refused() -> None:
    check = check_existing(RUN_EVENTS, 4, 1, RUN_EVENTS.configs())
    assert len(check.refusals) == 2
    assert "cronlog.run-events has 4 partitions, expected 8" in check.refusals[0]
    assert ("cronlog.run-events has replication factor 1, expected 3 "
            "(CRONLOG_TOPIC_REPLICATION_FACTOR)") in check.refusals[1]


NOW = datetime(2026, 12, 10, 15, 30, tzinfo=UTC)


def test_the_horizon_is_the_oldest_day_history_keeps_less_the_lead() -> None:
    assert horizon_start(NOW, timedelta(days=90), timedelta(minutes=2)) == \
        datetime(2026, 9, 11, tzinfo=UTC) - timedelta(minutes=2)


def test_a_log_trimmed_past_what_is_needed_is_a_gap() -> None:
    assert find_gap(("t", 0), Need(0), 0, None) is None
    assert find_gap(("t", 0), Need(5), 5, NOW) is None
    gap = find_gap(("t", 3), Need(0), 42, NOW)
    assert gap is not None
    assert gap.describe() == ("t partition 3: offsets 0 to 41 are no longer in the log; its "
                              "earliest message still held is offset 42, written "
                              "2026-12-10T15:30:00+00:00")


def test_a_log_trimmed_only_before_the_horizon_is_whole_enough() -> None:
    since = NOW - timedelta(days=90)
    assert find_gap(("t", 0), Need(0, since), 42, since - timedelta(seconds=1)) is None
    gap = find_gap(("t", 0), Need(0, since), 42, since + timedelta(seconds=1))
    assert gap is not None and "within the history horizon" in gap.describe()
    empty = find_gap(("t", 0), Need(0, since), 42, None)
    assert empty is not None and "it holds no message (next offset 42)" in empty.describe()
