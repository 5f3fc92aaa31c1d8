"""Adapters that give the partition owner its store and its catch-up, in domain terms."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from uuid import UUID

from cronlog.commands.partition_owner import Claim, Produced
from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_from_record
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from cronlog.projections.state import JobRow, RunRow


class CorruptState(RuntimeError):
    """A projection row whose stored event does not decode to what it should."""


def job_from_row(row: JobRow, codec: AvroCodec) -> Job:
    name, record = codec.decode(row.spec_event)
    if name not in ("JobCreated", "JobUpdated"):
        raise CorruptState(f"job {row.job_id}: spec event is a {name}")
    return Job.restore(row.job_id, row.version, row.created_at, row.updated_at,
                       spec=spec_from_record(record["spec"]), status=row.status,
                       next_fire_at=row.next_fire_at, last_fired_at=row.last_fired_at)


def run_from_row(row: RunRow, codec: AvroCodec) -> Run:
    name, record = codec.decode(row.scheduled_event)
    if name not in ("RunScheduled", "RunMissed", "RunSkipped"):
        raise CorruptState(f"run {row.run_id}: scheduled event is a {name}")
    return Run.restore(row.run_id, row.version, record["at"], row.updated_at,
                       job_id=row.job_id, tenant=record["tenant"], queue=record["queue"],
                       handler=record["handler"], scheduled_at=record["scheduled_at"],
                       trigger=record.get("trigger", "schedule"),
                       max_attempts=record.get("max_attempts", 0),
                       status=row.status, attempt=row.attempt,
                       attempt_status=row.attempt_status, not_before=row.not_before)


class OwnerStoreAdapter:
    def __init__(self, state: PostgresOwnerState, codec: AvroCodec) -> None:
        self._state = state
        self._codec = codec

    def take_epoch(self, partition: int, owner: str) -> Claim:
        claim = self._state.take_epoch(partition, owner)
        return Claim(claim.partition, claim.epoch, claim.job_events_offset,
                     claim.run_events_offset)

    def due_jobs(self, partitions: Iterable[int], horizon: datetime, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[Job]:
        return [job_from_row(r, self._codec)
                for r in self._state.due_jobs(partitions, horizon, limit, excluded_tenants)]

    def job(self, job_id: UUID) -> Job | None:
        row = self._state.job(job_id)
        return job_from_row(row, self._codec) if row else None

    def run(self, run_id: UUID) -> Run | None:
        row = self._state.run(run_id)
        return run_from_row(row, self._codec) if row else None

    def in_flight_runs(self, partition: int) -> list[Run]:
        return [run_from_row(r, self._codec) for r in self._state.in_flight_runs(partition)]

    def unfinished_runs(self, job_id: UUID) -> list[Run]:
        return [run_from_row(r, self._codec) for r in self._state.unfinished_runs(job_id)]

    def request(self, request_id: str) -> tuple[UUID, int] | None:
        return self._state.request(request_id)

    def apply(self, partition: int, epoch: int, job_events: Sequence[Produced],
              run_events: Sequence[Produced]) -> None:
        self._state.apply(partition, epoch, job_events, run_events)


class OwnerLogReplay:
    """Invariant 3: a new owner applies the partition's committed events before firing."""

    def __init__(self, replay: KafkaEventReplay, state: PostgresOwnerState,
                 settings: Settings) -> None:
        self._replay = replay
        self._state = state
        self._settings = settings

    def catch_up(self, claim: Claim) -> None:
        p = claim.partition
        for batch in self._replay.read(self._settings.job_events_topic, p,
                                       claim.job_events_offset):
            self._state.apply(p, claim.epoch, batch, [])
        for batch in self._replay.read(self._settings.run_events_topic, p,
                                       claim.run_events_offset):
            self._state.apply(p, claim.epoch, [], batch)
