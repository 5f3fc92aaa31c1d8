"""Adapters that give the partition owner its store and its catch-up, in domain terms."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from confluent_kafka import KafkaException

from cronlog.commands.owner.ports import (
    Claim,
    DueWindow,
    PartitionEvents,
    StoredRequest,
)
from cronlog.domain.calendar import Calendar
from cronlog.domain.catalogue import SPEC_EVENTS, RunEvent
from cronlog.domain.channel import Channel, ChannelKind
from cronlog.domain.dependency import ChainSlot, UpstreamEnd
from cronlog.domain.exclusions import AppliedCalendar, Exclusions
from cronlog.domain.fan_in import FanIn
from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.domain.run_chain import chain_of
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.codec import AvroCodec
from cronlog.infra.avro.event_mapping import spec_from_record
from cronlog.infra.config import Settings
from cronlog.infra.kafka.event_replay import KafkaEventReplay
from cronlog.infra.kafka.log_bounds import LogBounds
from cronlog.infra.postgres.calendar_sql import applied_from_json
from cronlog.infra.postgres.owner_state import PostgresOwnerState
from cronlog.ports import LogUnavailable
from cronlog.projections.state import JobRow, RunRow

log = logging.getLogger(__name__)


class CorruptState(RuntimeError):
    """A projection row whose stored event does not decode to what it should."""


def spec_of_row(row: JobRow, codec: AvroCodec) -> JobSpec:
    name, record = codec.decode(row.spec_event)
    if name not in SPEC_EVENTS:
        raise CorruptState(f"job {row.job_id}: spec event is a {name}")
    return spec_from_record(record["spec"])


def job_from_row(row: JobRow, codec: AvroCodec, spec: JobSpec | None = None) -> Job:
    return Job.restore(row.job_id, row.version, row.created_at, row.updated_at,
                       spec=spec or spec_of_row(row, codec), status=row.status,
                       next_fire_at=row.next_fire_at, last_fired_at=row.last_fired_at,
                       dependents=row.dependents, calendar=row.calendar,
                       revision=row.revision or row.version)


class SpecCache:
    """Decoded specs by their encoded event: a job due every second is decoded once, not
    every second. Specs are immutable values, so sharing them between jobs is safe."""

    def __init__(self, codec: AvroCodec, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._codec = codec
        # Bounded by the encoded size kept as keys, which dominates (payloads go to 256 KiB).
        self._max_bytes = max_bytes
        self._bytes = 0
        self._specs: OrderedDict[bytes, JobSpec] = OrderedDict()

    def job(self, row: JobRow) -> Job:
        spec = self._specs.get(row.spec_event)
        if spec is None:
            spec = spec_of_row(row, self._codec)
            self._specs[row.spec_event] = spec
            self._bytes += len(row.spec_event)
            while self._bytes > self._max_bytes:
                evicted, _ = self._specs.popitem(last=False)
                self._bytes -= len(evicted)
        else:
            self._specs.move_to_end(row.spec_event)
        return job_from_row(row, self._codec, spec)


def run_from_row(row: RunRow, codec: AvroCodec) -> Run:
    name, record = codec.decode(row.scheduled_event)
    if name not in (RunEvent.SCHEDULED, RunEvent.MISSED, RunEvent.SKIPPED):
        raise CorruptState(f"run {row.run_id}: scheduled event is a {name}")
    return Run.restore(row.run_id, row.version, record["at"], row.updated_at,
                       job_id=row.job_id, tenant=record["tenant"], queue=record["queue"],
                       handler=record["handler"], scheduled_at=record["scheduled_at"],
                       trigger=record.get("trigger", "schedule"),
                       max_attempts=record.get("max_attempts", 0),
                       status=row.status, attempt=row.attempt,
                       attempt_status=row.attempt_status, not_before=row.not_before,
                       attempt_base=row.attempt_base,
                       chain=chain_of(record.get("trigger", "schedule"),
                                      record.get("logical_time"), record.get("cascade"),
                                      record.get("upstream_run_ids") or (),
                                      record.get("depth") or 0))


class OwnerStoreAdapter:
    def __init__(self, state: PostgresOwnerState, codec: AvroCodec) -> None:
        self._state = state
        self._codec = codec
        self._specs = SpecCache(codec)

    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]:
        return self._state.take_epochs(partitions, owner)

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[Job]:
        return [self._specs.job(r)
                for r in self._state.due_jobs(partitions, window, limit, excluded_tenants)]

    def job(self, job_id: UUID) -> Job | None:
        row = self._state.job(job_id)
        return self._specs.job(row) if row else None

    def run(self, run_id: UUID) -> Run | None:
        row = self._state.run(run_id)
        return run_from_row(row, self._codec) if row else None

    def in_flight_runs(self, partitions: Sequence[int]) -> list[tuple[int, Run]]:
        return [(r.partition, run_from_row(r, self._codec))
                for r in self._state.in_flight_runs(partitions)]

    def caught_up(self, claims: Sequence[Claim], group_member: str) -> None:
        self._state.caught_up({c.partition: c.epoch for c in claims}, group_member)

    def load_jobs(self, job_ids: Sequence[UUID]) -> list[Job]:
        return [self._specs.job(r) for r in self._state.jobs(job_ids)]

    def load_runs(self, run_ids: Sequence[UUID]) -> list[Run]:
        return [run_from_row(r, self._codec) for r in self._state.runs(run_ids)]

    def unfinished_runs(self, job_id: UUID) -> list[Run]:
        return [run_from_row(r, self._codec) for r in self._state.unfinished_runs(job_id)]

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        return self._state.request(job_id, request_id)

    def requests(self, keys: Sequence[tuple[UUID, str]]
                 ) -> dict[tuple[UUID, str], StoredRequest]:
        return self._state.requests(keys)

    def apply(self, batches: Sequence[PartitionEvents]) -> None:
        self._state.apply_all(batches)

    def fan_in(self, job: Job) -> FanIn:
        return fan_in_from_rows(job, self._state.settled_slots(job.id),
                                self._state.waiting_ends(job.id))

    def waiting_fan_ins(self, partitions: Sequence[int]) -> list[tuple[int, UUID, datetime]]:
        return self._state.waiting_fan_ins(partitions)

    def jobs_with_dependents(self, partitions: Sequence[int]) -> list[tuple[int, UUID]]:
        return self._state.jobs_with_dependents(partitions)

    def calendar(self, calendar_id: UUID) -> Calendar | None:
        row = self._state.calendar(calendar_id)
        if row is None:
            return None
        cid, tenant, name, version, description, exclusions, created, updated, jobs = row
        return Calendar.restore(cid, int(version), created, updated, tenant=tenant, name=name,
                                description=description,
                                exclusions=Exclusions.parse(exclusions, "calendars.exclusions"),
                                subscribers=frozenset(jobs or ()))

    def channel(self, channel_id: UUID) -> Channel | None:
        row = self._state.channel(channel_id)
        if row is None:
            return None
        (cid, tenant, name, kind, target, recipients, description, is_default, rotation,
         version, deleted, created, updated) = row
        return Channel.restore(cid, int(version), created, updated, tenant=tenant, name=name,
                               kind=ChannelKind(kind), target=target,
                               recipients=tuple(recipients or ()), description=description,
                               is_default=bool(is_default), secret_rotation=int(rotation),
                               deleted=bool(deleted))

    def published_calendar(self, calendar_id: UUID) -> AppliedCalendar | None:
        row = self._state.published_calendar(calendar_id)
        if row is None:
            return None
        name, version, exclusions = row
        # Parsed once per version and shared with its followers' (applied_from_json).
        return applied_from_json({"name": name, "version": version, "found": True,
                                  "exclusions": exclusions})

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        return self._state.calendar_versions(calendar_ids)

    def following_jobs(self, job_ids: Sequence[UUID], partitions: Sequence[int]) -> list[Job]:
        return [self._specs.job(r) for r in self._state.following_jobs(job_ids, partitions)]

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        return self._state.stale_followers(partitions, within)



def fan_in_from_rows(job: Job, settled: Sequence[tuple[Any, ...]],
                     waiting: Sequence[tuple[Any, ...]]) -> FanIn:
    """Settled logical times first (oldest first), then the ends still waiting."""
    if job.spec.after is None:
        raise CorruptState(f"job {job.id} runs after no job, yet its fan-in was asked for")
    fan_in = FanIn(job.id, job.spec.after)
    for logical_time, cascade, settled_at, run_ids in settled:
        fan_in.note_settled(ChainSlot(logical_time, cascade), tuple(run_ids), settled_at)
    for logical_time, cascade, upstream, run_id, status, depth, opened_at in waiting:
        fan_in.restore_waiting(UpstreamEnd(upstream, run_id, status,
                                           ChainSlot(logical_time, cascade), depth), opened_at)
    return fan_in


class OwnerLogReplay:
    """Invariant 3: a new owner applies the partition's committed events before firing."""

    def __init__(self, replay: KafkaEventReplay, state: PostgresOwnerState,
                 settings: Settings, bounds: LogBounds | None = None) -> None:
        self._replay = replay
        self._state = state
        self._settings = settings
        self._bounds = bounds or LogBounds(settings)

    def start(self, claims: Sequence[Claim]) -> LogCatchUp:
        """All the claimed partitions at once, through one reader: a takeover costs the
        events to replay, not a fixed wait per partition."""
        return LogCatchUp(self._replay, self._state, self._settings, claims,
                          self._trimmed(claims))

    def _trimmed(self, claims: Sequence[Claim]) -> set[int]:
        """Partitions whose run events the log no longer holds from the applied offset on:
        an empty database rebuilt after retention trimmed them (docs/recovery.md)."""
        jobs, runs = self._settings.job_events_topic, self._settings.run_events_topic
        try:
            found = self._bounds.of([(t, c.partition) for c in claims for t in (jobs, runs)])
        except KafkaException as exc:
            raise LogUnavailable(f"log bounds of {len(claims)} partitions: {exc}") from exc
        for c in claims:
            if found[(jobs, c.partition)][0] > c.job_events_offset:
                # Jobs created before the first event kept cannot be rebuilt: job events
                # must be kept forever (docs/recovery.md). Said loudly; the catch-up stops
                # at the first change to a job it never saw.
                log.error("%s[%d] starts at offset %d, after the %d this projection has "
                          "applied: jobs created before it are lost", jobs, c.partition,
                          found[(jobs, c.partition)][0], c.job_events_offset)
        return {c.partition for c in claims
                if found[(runs, c.partition)][0] > c.run_events_offset}


class LogCatchUp:
    def __init__(self, replay: KafkaEventReplay, state: PostgresOwnerState,
                 settings: Settings, claims: Sequence[Claim],
                 trimmed: set[int] | None = None) -> None:
        self._state = state
        self._trimmed = trimmed or set()
        self._jobs, runs = settings.job_events_topic, settings.run_events_topic
        self._claims = {c.partition: c for c in claims}
        # Topics each partition has still to be read to its end.
        self._reading = {c.partition: {self._jobs, runs} for c in claims}
        self._reader = replay.reader(
            {**{(self._jobs, c.partition): c.job_events_offset for c in claims},
             **{(runs, c.partition): c.run_events_offset for c in claims}})

    @property
    def finished(self) -> bool:
        return not self._reading

    def advance(self, seconds: float) -> list[Claim]:
        caught_up: list[Claim] = []
        until = time.monotonic() + seconds
        while self._reading:
            batches, done = self._reader.step()
            for topic, partition, batch in batches:
                epoch = self._claims[partition].epoch
                if topic == self._jobs:
                    self._state.apply(partition, epoch, batch, [])
                else:
                    self._state.apply(partition, epoch, [], batch,
                                      runs_before_the_log=partition in self._trimmed)
            for topic, partition in done:
                left = self._reading.get(partition)
                if left is None:
                    continue
                left.discard(topic)
                if not left:
                    del self._reading[partition]
                    caught_up.append(self._claims[partition])
            if time.monotonic() >= until:
                break
        if not self._reading:
            self.close()
        return caught_up

    def close(self) -> None:
        self._reader.close()
