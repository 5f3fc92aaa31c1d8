"""`cronlog audit job <id> [--as-of TIME]`: a job's timeline read from the Kafka log."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from uuid import UUID

from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.infra.composition import build_event_replay
from cronlog.infra.config import Settings
from cronlog.infra.kafka.log_gaps import LogGapCheck, LogGapError, Need, horizon_start
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.projections.audit import job_as_of, timeline, why_dependency_runs


def read_job_log(settings: Settings, job_id: UUID, now: datetime
                 ) -> tuple[list[tuple[str, dict[str, object]]], list[tuple[str, dict[str, object]]]]:
    """The job's job events and run events: only its own partition of each topic is read.
    Raises LogGapError when the log no longer holds part of what it needs: every job event,
    and the run events of the history horizon."""
    replay = build_event_replay(settings)
    # The job's Kafka partition: its events are read there (its logical partition is a
    # Postgres and ownership notion, docs/partitions.md).
    partition = partition_for(str(job_id), settings.layout.kafka)
    needs = event_log_needs(settings, now, [partition])
    starts = LogGapCheck(settings).coverage(needs)
    starts.raise_gaps()
    found: list[list[tuple[str, dict[str, object]]]] = [[], []]
    for index, topic in enumerate((settings.job_events_topic, settings.run_events_topic)):
        for batch in replay.read(topic, partition, starts.starts[(topic, partition)],
                                 whole=True):
            found[index] += [(m.name, dict(m.record)) for m in batch
                             if str(m.record.get("job_id")) == str(job_id)]
    return found[0], found[1]


def event_log_needs(settings: Settings, now: datetime,
                    partitions: list[int]) -> dict[tuple[str, int], Need]:
    """What a replay or an audit needs of the event topics' partitions: job events from
    offset 0 (kept forever), run events from the history horizon (kept at least that long)."""
    since = horizon_start(now, settings.history_retention, 2 * settings.sparse_lookahead)
    return {**{(settings.job_events_topic, p): Need(0) for p in partitions},
            **{(settings.run_events_topic, p): Need(0, since) for p in partitions}}


def print_gaps(error: LogGapError, command: str) -> None:
    print(f"cronlog {command}: error: the log no longer holds events it needs; refusing "
          "to go on as if nothing were missing (docs/operations.md, \"Gaps in the log\"):",
          file=sys.stderr)
    for gap in error.gaps:
        print(f"  {gap.describe()}", file=sys.stderr)


def run_audit(settings: Settings, job_id: str, as_of: str | None) -> int:
    try:
        job = UUID(job_id)
    except ValueError:
        print(f"error: job id {job_id!r} is not a UUID")
        return 2
    try:
        job_events, run_events = read_job_log(settings, job, datetime.now(UTC))
    except LogGapError as exc:
        print_gaps(exc, "audit")
        return 1
    if not job_events:
        print(f"job {job} has no events in {settings.job_events_topic}")
        return 1
    for entry in timeline([*job_events, *run_events]):
        print(f"{entry.at.isoformat()}  v{entry.version:<4} {entry.event:<18} "
              f"{entry.actor:<32} {entry.details}")
    why = why_dependency_runs(job_events, run_events)
    if why:
        print()
        print("dependency runs, and the upstream runs that made them:")
        for line in why:
            print(f"  {line}")
    if as_of is not None:
        instant = datetime.fromisoformat(as_of)
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=UTC)
        state = job_as_of(job_events, instant, record_to_event)
        print()
        if state is None:
            print(f"as of {instant.isoformat()}: job {job} did not exist yet")
        else:
            print(f"as of {instant.isoformat()}: version {state.version}, status {state.status}, "
                  f"next fire {state.next_fire_at}, last fired {state.last_fired_at}")
            print(f"  spec: {state.spec}")
    return 0
