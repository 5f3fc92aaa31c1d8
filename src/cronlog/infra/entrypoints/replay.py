"""`cronlog replay`: rebuild the Postgres and ClickHouse projections from the log into fresh
tables and compare them with the live ones; `cronlog replay --rebuild`: rebuild the
ClickHouse history and put it in place of the live one.

Both first check that the log still holds what they need (log_gaps.py) and refuse, naming
each partition and what is missing, when it does not.

The live projections may be ahead of the rebuild (events committed after the replay read
the log): a row counts as a mismatch only when the rebuilt one has the same or a newer
version and differs. They may also be a moment behind it on a running service (the owner
applies to Postgres after its commit, the projector inserts in batches): a difference is
read from the live side again until it is gone or SETTLE_WITHIN_S has passed, and only
then reported.

The rebuilt copies (a Postgres schema and a ClickHouse database named replay_<tag>) are
dropped once they match, so that repeated audits leave nothing behind; they are kept when
they differ, for a look at the mismatches, or with --keep.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

import psycopg

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory
from cronlog.infra.composition import build_event_replay, build_run_history
from cronlog.infra.config import Settings
from cronlog.infra.entrypoints.audit import event_log_needs, print_gaps
from cronlog.infra.entrypoints.history_rebuild import project_history, rebuild_history
from cronlog.infra.kafka.log_bounds import TopicPartitionKey
from cronlog.infra.kafka.log_gaps import LogGapCheck, LogGapError
from cronlog.infra.postgres.connection import ensure_schema
from cronlog.infra.postgres.owner_state import PostgresOwnerState

# With the partition each row carries: the logical one (docs/partitions.md), which the
# rebuild must derive as the live owner did.
JOB_STATE = ("SELECT job_id::text, version, status, next_fire_at, last_fired_at, "
             "dependents::text[], partition, COALESCE(revision, version) FROM {schema}.jobs")
# Settled logical times of dependent jobs never change once written (issue 16).
SETTLED_STATE = ("SELECT job_id::text, logical_time, cascade, 0, settled_at, "
                 "upstream_run_ids::text[] FROM {schema}.dependency_settled")
# Alert channels (issue 37), rebuilt from their events like the jobs; no secret is stored.
CHANNEL_STATE = ("SELECT channel_id::text, version, tenant, name, kind, target, "
                 "recipients, description, is_default, secret_rotation, deleted, "
                 "partition FROM {schema}.channels")
RUN_STATE = ("SELECT run_id::text, version, status, attempt, attempt_status, not_before, "
             "partition FROM {schema}.runs")
HISTORY_STATE = ("SELECT run_id, attempt, version, run_status, attempt_status, started_at_us, "
                 "finished_at_us, start_lag_us, logical_time_us, cascade, upstream_run_ids, "
                 "depth FROM {db}.runs FINAL")
MISSED_STATE = ("SELECT job_id, first_us, version, last_us, count, tenant "
                "FROM {db}.missed_fire_times FINAL")


# How long a difference may last before it is one: a running service's projections apply
# what the log holds within seconds (the projector's batches, the owner's apply).
SETTLE_WITHIN_S = 30.0
_SETTLE_POLL_S = 1.0


@dataclass
class Comparison:
    what: str
    rebuilt: int = 0
    live: int = 0
    mismatches: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.what}: {self.rebuilt} rebuilt, {self.live} live, "
                f"{len(self.mismatches)} mismatches")


def _compare(what: str, rebuilt: list[tuple[object, ...]], live: list[tuple[object, ...]],
             key_len: int, version_at: int) -> Comparison:
    result = Comparison(what, len(rebuilt), len(live))
    live_rows = {row[:key_len]: row for row in live}
    for row in rebuilt:
        other = live_rows.get(row[:key_len])
        if other is None:
            result.mismatches.append(f"{row[:key_len]} missing from live")
        elif row[version_at] >= other[version_at] and row != other:  # type: ignore[operator]
            result.mismatches.append(f"{row[:key_len]}: rebuilt {row} != live {other}")
    return result


def _settled(compare: Callable[[], Comparison],
             within_s: float = SETTLE_WITHIN_S) -> Comparison:
    """compare() again, each time reading the live side anew, until it finds no mismatch
    or within_s has passed; at most within_s / _SETTLE_POLL_S + 1 reads."""
    deadline = time.monotonic() + within_s
    result = compare()
    while result.mismatches and time.monotonic() < deadline:
        time.sleep(_SETTLE_POLL_S)
        result = compare()
    return result


def _with_search_path(dsn: str, schema: str) -> str:
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"


def rebuild_postgres(settings: Settings, schema: str,
                     starts: dict[TopicPartitionKey, int] | None = None) -> list[Comparison]:
    starts = starts or {}
    with psycopg.connect(settings.postgres_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    dsn = _with_search_path(settings.postgres_dsn, schema)
    ensure_schema(dsn, settings.partitions)
    state = PostgresOwnerState(dsn, settings.layout)
    replay = build_event_replay(settings)
    for partition in range(settings.layout.kafka):
        # A fresh schema's partitions are at epoch 0; nothing else writes to it. The log is
        # read by Kafka partition; each row lands on its event's logical partition.
        for topic in (settings.job_events_topic, settings.run_events_topic):
            start = starts.get((topic, partition), 0)
            for batch in replay.read(topic, partition, start, whole=True):
                if topic == settings.job_events_topic:
                    state.apply(partition, 0, batch, [])
                else:
                    # Run events trimmed before the horizon: runs begun before them are
                    # not in this fresh schema, and not in the comparison either.
                    state.apply(partition, 0, [], batch, runs_before_the_log=start > 0)
    state.close()
    tables = (("postgres jobs", JOB_STATE, 1), ("postgres runs", RUN_STATE, 1),
              ("postgres dependency_settled", SETTLED_STATE, 3),
              ("postgres channels", CHANNEL_STATE, 1))
    with psycopg.connect(settings.postgres_dsn, autocommit=True) as conn:
        def comparing(what: str, query: str, key_len: int) -> Callable[[], Comparison]:
            return lambda: _compare(what, conn.execute(query.format(schema=schema)).fetchall(),
                                    conn.execute(query.format(schema="public")).fetchall(),
                                    key_len, key_len)

        return [_settled(comparing(*table)) for table in tables]


def _history(settings: Settings, database: str) -> ClickHouseRunHistory:
    return build_run_history(settings, database)


def rebuild_clickhouse(settings: Settings, database: str,
                       starts: dict[TopicPartitionKey, int] | None = None,
                       now: datetime | None = None) -> Comparison:
    """The history projected from the log into `database` (runs, jobs, missed fire times,
    cut to the horizon), its runs compared with the live ones."""
    rebuilt, _ = project_history(settings, database, starts or {}, now or datetime.now(UTC))
    live = _history(settings, settings.clickhouse_database)
    rebuilt_rows = list(rebuilt.execute(HISTORY_STATE.format(db=database)))
    return _settled(lambda: _compare(
        "clickhouse runs", rebuilt_rows,
        list(live.execute(HISTORY_STATE.format(db=settings.clickhouse_database))), 2, 2))


def compare_missed_ranges(settings: Settings, database: str) -> Comparison:
    """The missed fire time ranges (JobFireTimesMissed) rebuilt into `database` by
    rebuild_clickhouse, compared with the live table."""
    rebuilt = _history(settings, database)
    live = _history(settings, settings.clickhouse_database)
    rebuilt_rows = list(rebuilt.execute(MISSED_STATE.format(db=database)))
    return _settled(lambda: _compare(
        "clickhouse missed fire times", rebuilt_rows,
        list(live.execute(MISSED_STATE.format(db=settings.clickhouse_database))), 2, 2))


DROP_SCHEMA = 'DROP SCHEMA IF EXISTS "{schema}" CASCADE'
DROP_DATABASE = "DROP DATABASE IF EXISTS {db}"


def drop_copies(settings: Settings, schema: str, database: str) -> None:
    """Drops what a replay rebuilt: its Postgres schema and its ClickHouse database."""
    with psycopg.connect(settings.postgres_dsn, autocommit=True) as conn:
        conn.execute(DROP_SCHEMA.format(schema=schema))
    _history(settings, settings.clickhouse_database).execute(
        DROP_DATABASE.format(db=database))


def run_replay(settings: Settings, rebuild: bool = False, keep: bool = False) -> int:
    now = datetime.now(UTC)
    command = "replay --rebuild" if rebuild else "replay"
    try:
        coverage = LogGapCheck(settings).coverage(
            event_log_needs(settings, now, list(range(settings.layout.kafka))))
        coverage.raise_gaps()
        if rebuild:
            for line in rebuild_history(settings, coverage.starts, now):
                print(line)
            return 0
        tag = "replay_" + uuid.uuid4().hex[:8]
        database = f"{settings.clickhouse_database}_{tag}"
        results = [*rebuild_postgres(settings, tag, coverage.starts),
                   rebuild_clickhouse(settings, database, coverage.starts, now),
                   compare_missed_ranges(settings, database)]
    except LogGapError as exc:
        # Also when retention trimmed a partition between the check and the read.
        print_gaps(exc, command)
        return 1
    for result in results:
        print(result.line())
        for mismatch in result.mismatches[:10]:
            print("  ", mismatch)
    differ = any(r.mismatches for r in results)
    if differ or keep:
        print(f"rebuilt into Postgres schema {tag} and ClickHouse database {database}, kept"
              + ("" if keep else " for a look at the mismatches"))
    else:
        drop_copies(settings, tag, database)
        print(f"rebuilt into Postgres schema {tag} and ClickHouse database {database}, "
              "dropped: they match (--keep keeps them)")
    return 1 if differ else 0
