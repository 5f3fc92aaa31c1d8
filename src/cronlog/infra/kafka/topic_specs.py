"""What every cronlog topic should be, in one table: partitions, replication, retention and
why. `cronlog provision` creates and checks topics from it, `cronlog provision --print`
lists it, and docs/operations.md explains it. Pure: no client, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from cronlog.infra.config import ConfigError, Settings

ENV = "CRONLOG_"
# Run events outlive the history they rebuild by this much by default: history keeps whole
# days, and a rebuild needs every run's first event, written up to a lookahead before it.
RUN_EVENTS_SLACK = timedelta(days=7)
REPLIES_RETENTION = timedelta(days=1)
DELETE = "delete"
# The workers topic keeps each worker's newest announcement (compact), and drops a worker
# not heard from for a day (delete) even when it never withdrew: at most a day of dead
# workers for an api to read at its start. Segments roll hourly so that both happen.
COMPACT_DELETE = "compact,delete"
WORKERS_RETENTION = timedelta(days=1)
WORKERS_SEGMENT_MS = 3_600_000


@dataclass(frozen=True)
class TopicSpec:
    name: str
    kind: str
    partitions: int
    replication_factor: int
    min_insync_replicas: int
    # None: kept forever (retention.ms=-1).
    retention: timedelta | None
    cleanup_policy: str
    why: str
    # segment.ms when set; only a compacted topic needs it (closed segments are compacted).
    segment_ms: int | None = None

    @property
    def retention_ms(self) -> int:
        return -1 if self.retention is None else int(self.retention.total_seconds() * 1000)

    def configs(self) -> dict[str, str]:
        """The topic configs cronlog sets (and checks on existing topics)."""
        segment = {} if self.segment_ms is None else {"segment.ms": str(self.segment_ms)}
        return {"retention.ms": str(self.retention_ms),
                "min.insync.replicas": str(self.min_insync_replicas),
                "cleanup.policy": self.cleanup_policy, **segment}


def retention_text(retention: timedelta | None) -> str:
    if retention is None:
        return "forever"
    if retention % timedelta(days=1) == timedelta(0):
        return f"{retention.days} day{'s' if retention.days != 1 else ''}"
    return f"{retention.total_seconds() / 3600:g} hours"


def _days(value: int) -> timedelta:
    return timedelta(days=value)


def _at_least_history(settings: Settings, variable: str, days: int,
                      default: timedelta | None) -> timedelta | None:
    """The configured retention (0: the default), refused when shorter than the history:
    the log is the source of truth, and `cronlog replay --rebuild` rebuilds history from it."""
    if days == 0:
        return default
    if _days(days) < settings.history_retention:
        raise ConfigError(
            f"{ENV}{variable}: {days} days is less than the history retention "
            f"({ENV}HISTORY_RETENTION_DAYS, {settings.history_retention.days} days); the log "
            "must hold at least what the run history shows, so it can be rebuilt from it")
    return _days(days)


def check_replication(settings: Settings) -> None:
    rf, isr = settings.topic_replication_factor, settings.topic_min_insync_replicas
    if isr > rf:
        raise ConfigError(
            f"{ENV}TOPIC_MIN_INSYNC_REPLICAS ({isr}) is more than "
            f"{ENV}TOPIC_REPLICATION_FACTOR ({rf}): no write could ever be acknowledged "
            "(acks=all)")


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """Every topic of the deployment: the shared ones and the dispatch topic of each
    declared queue (never one a request names). Raises ConfigError for a setting that
    cannot be met."""
    check_replication(settings)
    history = settings.history_retention
    job_events = _at_least_history(settings, "JOB_EVENTS_RETENTION_DAYS",
                                   settings.job_events_retention_days, None)
    run_events = _at_least_history(settings, "RUN_EVENTS_RETENTION_DAYS",
                                   settings.run_events_retention_days, history + RUN_EVENTS_SLACK)
    dispatch = _at_least_history(settings, "DISPATCH_RETENTION_DAYS",
                                 settings.dispatch_retention_days, history)
    rows: list[tuple[str, str, timedelta | None, str]] = [
        (settings.inbox_topic, "inbox", _days(settings.inbox_retention_days),
         "commands and worker reports, needed only until their owner applies them; what a "
         "command did is recorded in the job events (request ids included)"),
        (settings.job_events_topic, "job-events", job_events,
         "the audit trail and the source of the jobs' state: Postgres and the jobs history "
         "are rebuilt from all of it"),
        (settings.run_events_topic, "run-events", run_events,
         "the source of the run history: at least the history horizon, so ClickHouse can be "
         "rebuilt from it"),
        (settings.replies_topic, "replies", REPLIES_RETENTION,
         "answers the api waits for (at most 2 minutes); nothing reads them later"),
        (settings.dead_letters_topic, "dead-letters", history,
         "runs out of retries, kept as long as their history"),
        (settings.alerts_topic, "alerts", history,
         "alerts for an alert consumer, kept as long as the history they refer to"),
        (settings.poison_topic, "poison", history,
         "messages set aside with their bytes and error, for an operator to inspect"),
        (settings.alert_deliveries_topic, "alert-deliveries", history,
         "each attempt of each alert's delivery, keyed by job id, the source of ClickHouse's "
         "alert_deliveries: kept as long as the history, so it can be rebuilt from it"),
        *((settings.dispatch_topic(q), "dispatch", dispatch,
           f"runs dispatched to queue {q!r}; kept as long as their history") for q in settings.queues),
    ]
    # Every job-keyed topic has the layout's K Kafka partitions (docs/partitions.md).
    return [*(TopicSpec(name=name, kind=kind, partitions=settings.layout.kafka,
                        replication_factor=settings.topic_replication_factor,
                        min_insync_replicas=settings.topic_min_insync_replicas,
                        retention=retention, cleanup_policy=DELETE, why=why)
              for name, kind, retention, why in rows),
            # Keyed by worker id, read whole by every api: one partition (docs/workers.md).
            TopicSpec(name=settings.workers_topic, kind="workers", partitions=1,
                      replication_factor=settings.topic_replication_factor,
                      min_insync_replicas=settings.topic_min_insync_replicas,
                      retention=WORKERS_RETENTION, cleanup_policy=COMPACT_DELETE,
                      why="each worker's newest announcement of itself, for the apis' worker "
                          "list", segment_ms=WORKERS_SEGMENT_MS)]


def spec_table(specs: list[TopicSpec]) -> list[str]:
    """The specs as a table for people (`cronlog provision --print`)."""
    header = ("topic", "partitions", "RF", "min ISR", "retention", "cleanup")
    rows = [(s.name, str(s.partitions), str(s.replication_factor), str(s.min_insync_replicas),
             retention_text(s.retention), s.cleanup_policy) for s in specs]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def kafka_topics_commands(specs: list[TopicSpec], bootstrap: str) -> list[str]:
    """The same topics as `kafka-topics.sh --create` commands, for operators who create
    topics by hand."""
    return [f"kafka-topics.sh --bootstrap-server {bootstrap} --create --topic {s.name} "
            f"--partitions {s.partitions} --replication-factor {s.replication_factor} "
            + " ".join(f"--config {k}={v}" for k, v in s.configs().items())
            for s in specs]


@dataclass(frozen=True)
class TopicCheck:
    """What an existing topic needs: configs to alter (safe: they move no data and delete
    nothing), notes for the operator, and refusals (what only the operator can change)."""
    alter: dict[str, str]
    notes: list[str]
    refusals: list[str]


def _retention_ms(value: str | None) -> int:
    try:
        return int(value) if value is not None else -1
    except ValueError:
        return -1


def layout_refusal(spec: TopicSpec, partitions: int) -> str | None:
    """Why an existing topic with this many partitions cannot serve the configured layout;
    None when it can."""
    if partitions == spec.partitions:
        return None
    # Kafka partition k of every job-keyed topic must belong to the same owner.
    return (f"topic {spec.name} has {partitions} partitions, expected {spec.partitions} "
            f"({ENV}KAFKA_PARTITIONS, or {ENV}PARTITIONS when that is not set); the partition "
            "count cannot change after the fact: keep the layout the topics were created "
            "with, or migrate by replaying the log into new topics (docs/partitions.md, "
            "\"Migrating\")")


def check_existing(spec: TopicSpec, partitions: int, replication_factor: int,
                   configs: Mapping[str, str | None]) -> TopicCheck:
    """Compares an existing topic with its spec."""
    alter: dict[str, str] = {}
    notes: list[str] = []
    refusals: list[str] = []
    name = spec.name
    refused = layout_refusal(spec, partitions)
    if refused:
        refusals.append(refused)
    if replication_factor < spec.replication_factor:
        refusals.append(
            f"topic {name} has replication factor {replication_factor}, expected "
            f"{spec.replication_factor} ({ENV}TOPIC_REPLICATION_FACTOR); raise it with "
            "kafka-reassign-partitions.sh (docs/operations.md, \"Topics\")")
    elif replication_factor > spec.replication_factor:
        notes.append(f"topic {name} has replication factor {replication_factor}, more than "
                     f"the {spec.replication_factor} configured; left as is")
    held = _retention_ms(configs.get("retention.ms"))
    wanted = spec.retention_ms
    held_forever, wanted_forever = held < 0, wanted < 0
    if not held_forever and (wanted_forever or held < wanted):
        alter["retention.ms"] = str(wanted)
        notes.append(f"topic {name}: retention {held} ms is shorter than the "
                     f"{retention_text(spec.retention)} required; set retention.ms={wanted}")
    elif held != wanted:
        notes.append(f"topic {name}: retention {'forever' if held_forever else f'{held} ms'} "
                     f"is longer than the {retention_text(spec.retention)} configured; left as "
                     "is (shortening it deletes data: do it by hand)")
    isr = int(configs.get("min.insync.replicas") or 1)
    if isr < spec.min_insync_replicas:
        alter["min.insync.replicas"] = str(spec.min_insync_replicas)
        notes.append(f"topic {name}: min.insync.replicas {isr} is less than the "
                     f"{spec.min_insync_replicas} configured; set")
    elif isr > spec.min_insync_replicas:
        notes.append(f"topic {name}: min.insync.replicas {isr} is more than the "
                     f"{spec.min_insync_replicas} configured; left as is")
    policy = configs.get("cleanup.policy") or DELETE
    if policy != spec.cleanup_policy:
        # Compaction would keep only the newest event of each job: the log would lose its
        # history. Switching to delete keeps everything within the retention checked above.
        alter["cleanup.policy"] = spec.cleanup_policy
        notes.append(f"topic {name}: cleanup.policy {policy} replaced by {spec.cleanup_policy}")
    return TopicCheck(alter, notes, refusals)
