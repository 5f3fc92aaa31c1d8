"""`cronlog audit job <id> [--as-of TIME]`: a job's timeline read from the Kafka log."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from cronlog.infra.avro.event_mapping import record_to_event
from cronlog.infra.composition import build_event_replay
from cronlog.infra.config import Settings
from cronlog.infra.kafka.partitioner import partition_for
from cronlog.projections.audit import job_as_of, timeline


def read_job_log(settings: Settings, job_id: UUID) -> tuple[list[tuple[str, dict[str, object]]],
                                                          list[tuple[str, dict[str, object]]]]:
    """The job's job events and run events: only its own partition of each topic is read."""
    replay = build_event_replay(settings)
    partition = partition_for(str(job_id), settings.partitions)
    found: list[list[tuple[str, dict[str, object]]]] = [[], []]
    for index, topic in enumerate((settings.job_events_topic, settings.run_events_topic)):
        for batch in replay.read(topic, partition, 0):
            found[index] += [(m.name, dict(m.record)) for m in batch
                             if str(m.record.get("job_id")) == str(job_id)]
    return found[0], found[1]


def run_audit(settings: Settings, job_id: str, as_of: str | None) -> int:
    try:
        job = UUID(job_id)
    except ValueError:
        print(f"error: job id {job_id!r} is not a UUID")
        return 2
    job_events, run_events = read_job_log(settings, job)
    if not job_events:
        print(f"job {job} has no events in {settings.job_events_topic}")
        return 1
    for entry in timeline([*job_events, *run_events]):
        print(f"{entry.at.isoformat()}  v{entry.version:<4} {entry.event:<18} "
              f"{entry.actor:<32} {entry.details}")
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
