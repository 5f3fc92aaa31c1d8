"""In-memory owner stores: the aggregates the owner committed and the dependency rows of
the Postgres projection, applied by the projection's own functions; one that also keeps the
request ids the events take, one that also keeps calendars."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.commands.owner.ports import (
    Claim,
    DueWindow,
    PartitionEvents,
    Produced,
    StoredRequest,
)
from cronlog.domain.calendar import Calendar
from cronlog.domain.catalogue import CalendarEvent, ChannelEvent
from cronlog.domain.channel import Channel, ChannelKind
from cronlog.domain.exclusions import AppliedCalendar, DateRange, Exclusions, calendar_id
from cronlog.domain.fan_in import FanIn
from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.infra.owner_adapters import fan_in_from_rows
from cronlog.infra.postgres.state_writer import BatchingStateWriter
from cronlog.projections.state import SettledSlot, WaitingEnd, apply_job_event, apply_run_event
from tests.support.owner_transport import FakeTransport

CALENDAR_EVENTS = frozenset(CalendarEvent)
CHANNEL_EVENTS = frozenset(ChannelEvent)


class FanInRows:
    """The dependency part of the Postgres projection (dependency_ends, _settled), in
    memory, applied by the projection's own functions; the rest of its writes are ignored."""

    def __init__(self) -> None:
        self.ends: dict[tuple[UUID, datetime, str, UUID], WaitingEnd] = {}
        self.settled: dict[tuple[UUID, datetime, str], SettledSlot] = {}

    def insert_job(self, row: Any) -> None:
        pass

    def update_job(self, *args: Any) -> None:
        pass

    def insert_run(self, row: Any) -> None:
        pass

    def update_run(self, *args: Any) -> None:
        pass

    def record_request(self, *args: Any, **kwargs: Any) -> None:
        pass

    def set_dependents(self, job_id: UUID, dependents: tuple[UUID, ...]) -> None:
        pass

    def set_calendar(self, *args: Any, **kwargs: Any) -> None:
        pass

    def put_calendar(self, row: Any) -> None:
        pass

    def change_channel(self, change: Any) -> None:
        pass

    def subscribe(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_with(self, end: WaitingEnd) -> None:
        if (end.job_id, end.logical_time, end.cascade) not in self.settled:
            self.ends.setdefault(
                (end.job_id, end.logical_time, end.cascade, end.upstream_job_id), end)

    def settle(self, slot: SettledSlot) -> None:
        key = (slot.job_id, slot.logical_time, slot.cascade)
        self.settled.setdefault(key, slot)
        for end_key in [k for k in self.ends if k[:3] == key]:
            del self.ends[end_key]


@dataclass
class FakeStore:
    """Keeps the aggregates the owner committed, as the Postgres projection would."""

    jobs: dict[UUID, Job] = field(default_factory=dict)
    runs: dict[UUID, Run] = field(default_factory=dict)
    applied: list[tuple[int, int, list[str]]] = field(default_factory=list)
    pending_jobs: dict[UUID, Job] = field(default_factory=dict)
    epoch: int = 0
    caught_up_by: tuple[tuple[int, ...], str] | None = None
    # Replays every applied event into the aggregates, as the projection would.
    replays: bool = False
    fan_in_rows: FanInRows = field(default_factory=lambda: FanInRows())

    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]:
        self.epoch += 1
        return [Claim(partition, self.epoch, 0, 0) for partition in partitions]

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[Job]:
        due = [j for j in self.jobs.values()
               if j.status == "active" and j.next_fire_at is not None
               and (j.next_fire_at <= window.until or (
                   j.next_fire_at <= window.sparse_until and j.runs_apart(window.sparse_gap)))
               and j.spec.tenant not in excluded_tenants]
        ordered = sorted(due, key=lambda j: j.next_fire_at)[:limit]  # type: ignore[arg-type,return-value]
        # Like Postgres, the store hands out fresh copies: an aborted cycle changes nothing.
        return [copy.deepcopy(j) for j in ordered]

    def job(self, job_id: UUID) -> Job | None:
        return copy.deepcopy(self.jobs.get(job_id))

    def run(self, run_id: UUID) -> Run | None:
        return copy.deepcopy(self.runs.get(run_id))

    def load_jobs(self, job_ids: Sequence[UUID]) -> list[Job]:
        return [copy.deepcopy(self.jobs[j]) for j in job_ids if j in self.jobs]

    def load_runs(self, run_ids: Sequence[UUID]) -> list[Run]:
        return [copy.deepcopy(self.runs[r]) for r in run_ids if r in self.runs]

    def in_flight_runs(self, partitions: Sequence[int]) -> list[tuple[int, Run]]:
        return [(0, r) for r in self.runs.values()
                if r.status in ("scheduled", "running") and 0 in partitions]

    def caught_up(self, claims: Sequence[Claim], group_member: str) -> None:
        self.caught_up_by = (tuple(c.partition for c in claims), group_member)

    def unfinished_runs(self, job_id: UUID) -> list[Run]:
        return [copy.deepcopy(r) for r in self.runs.values()
                if r.job_id == job_id and r.status in ("scheduled", "running")]

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        return None

    def requests(self, keys: Sequence[tuple[UUID, str]]
                 ) -> dict[tuple[UUID, str], StoredRequest]:
        return {key: found for key in keys if (found := self.request(*key)) is not None}

    def fan_in(self, job: Job) -> FanIn:
        return fan_in_from_rows(
            job, [(s.logical_time, s.cascade, s.settled_at, s.upstream_run_ids)
                  for s in sorted(self.fan_in_rows.settled.values(),
                                  key=lambda s: s.settled_at) if s.job_id == job.id],
            [(e.logical_time, e.cascade, e.upstream_job_id, e.upstream_run_id, e.status,
              e.depth, e.opened_at) for e in self.fan_in_rows.ends.values()
             if e.job_id == job.id])

    def waiting_fan_ins(self, partitions: Sequence[int]) -> list[tuple[int, UUID, datetime]]:
        earliest: dict[UUID, datetime] = {}
        for e in self.fan_in_rows.ends.values():
            earliest[e.job_id] = min(earliest.get(e.job_id, e.opened_at), e.opened_at)
        return [(0, j, t) for j, t in earliest.items() if 0 in partitions]

    def jobs_with_dependents(self, partitions: Sequence[int]) -> list[tuple[int, UUID]]:
        return [(0, j.id) for j in self.jobs.values()
                if getattr(j, "dependents", ()) and 0 in partitions]

    # Calendars and channels: none here; CalendarStore keeps them, and
    # tests/unit/commands/test_calendar_followers.py keeps calendars by reference (issue 33).
    def calendar(self, calendar_id: UUID) -> Calendar | None:
        return None

    def channel(self, channel_id: UUID) -> Channel | None:
        return None

    def published_calendar(self, calendar_id: UUID) -> AppliedCalendar | None:
        return None

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        return {}

    def following_jobs(self, job_ids: Sequence[UUID], partitions: Sequence[int]) -> list[Job]:
        return self.load_jobs(job_ids) if 0 in partitions else []

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        return []

    def apply(self, batches: Sequence[PartitionEvents]) -> None:
        for b in batches:
            self.apply_partition(b.partition, b.epoch, b.job_events, b.run_events)

    def apply_partition(self, partition: int, epoch: int, job_events: Sequence[Produced],
              run_events: Sequence[Produced]) -> None:
        self.applied.append((partition, epoch, [e.name for e in [*job_events, *run_events]]))
        for e in job_events:
            apply_job_event(self.fan_in_rows, partition, e.name, e.record, e.raw)
        for e in run_events:
            apply_run_event(self.fan_in_rows, partition, e.name, e.record, e.raw)
        if not self.replays:
            return
        from cronlog.infra.avro.event_mapping import record_to_event

        for found, events, key in ((self.jobs, job_events, "job_id"),
                                   (self.runs, run_events, "run_id")):
            for e in events:
                aggregate_id = UUID(str(e.record[key]))
                event = record_to_event(e.name, e.record)
                found[aggregate_id] = event.mutate(found.get(aggregate_id))


def sync(store: FakeStore, transport: FakeTransport) -> None:
    """Makes the fake store reflect the last transaction, as the projection would."""
    from cronlog.infra.avro.event_mapping import spec_from_record

    for out in transport.transactions[-1]:
        r = out.record
        if out.name == "JobCreated":
            store.jobs[UUID(str(r["job_id"]))] = Job.restore(
                UUID(str(r["job_id"])), r["version"], r["at"], r["at"],
                spec=spec_from_record(r["spec"]), status="active",
                next_fire_at=r["next_fire_at"], last_fired_at=None, dependents=(),
                calendar=None, revision=r["version"])
        elif out.name == "JobFireAdvanced":
            job = store.jobs[UUID(str(r["job_id"]))]
            job.next_fire_at, job.last_fired_at = r["next_fire_at"], r["fired_at"]
            job.version = r["version"]


@dataclass
class RequestStore(FakeStore):
    """The fake store, keeping the request ids the applied events take, as the Postgres
    projection does (the same writer, without the database)."""

    taken: dict[tuple[UUID, str], dict[str, Any]] = field(default_factory=dict)

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        row = self.taken.get((job_id, request_id))
        if row is None:
            return None
        return StoredRequest(row["command"], row["request_digest"], row["job_version"])

    def apply_partition(self, partition: int, epoch: int, job_events: Sequence[Produced],
              run_events: Sequence[Produced]) -> None:
        super().apply_partition(partition, epoch, job_events, run_events)
        writer = BatchingStateWriter()
        writer.requests = self.taken
        for event in job_events:
            apply_job_event(writer, partition, event.name, event.record, b"")


class CalendarStore(FakeStore):
    """The fake store, with calendars and alert channels kept from their committed events
    as the projection keeps the calendars and channels tables."""

    def __init__(self) -> None:
        super().__init__(replays=True)
        self.calendars: dict[UUID, Calendar] = {}
        self.channels: dict[UUID, Channel] = {}

    def channel(self, channel_id: UUID) -> Channel | None:
        # A fresh copy, as a read of the table: an aborted cycle changes nothing.
        return copy.deepcopy(self.channels.get(channel_id))

    def calendar(self, calendar_id: UUID) -> Calendar | None:
        return self.calendars.get(calendar_id)

    def published_calendar(self, calendar_id: UUID) -> AppliedCalendar | None:
        held = self.calendars.get(calendar_id)
        return (None if held is None
                else AppliedCalendar(held.name, held.version, True, held.exclusions))

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        return {c: self.calendars[c].version for c in calendar_ids if c in self.calendars}

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        """As the projection's query: found, and older than the calendar's row."""
        stale = []
        for job in self.jobs.values():
            if job.calendar is None or not job.calendar.found or job.status == "deleted":
                continue
            held = self.calendars.get(calendar_id(job.spec.tenant, job.calendar.name))
            if held is not None and job.calendar.version < held.version and 0 in partitions:
                stale.append((job.id, held.id, held.version))
        return stale

    def apply_partition(self, partition: int, epoch: int, job_events: Sequence[Produced],
              run_events: Sequence[Produced]) -> None:
        for e in job_events:
            if e.name in CALENDAR_EVENTS:
                self._apply_calendar(e.name, e.record)
            elif e.name in CHANNEL_EVENTS:
                self._apply_channel(e.name, e.record)
        # A calendar's or channel's command's request id is taken on its id.
        super().apply_partition(partition, epoch, [
            e for e in job_events if e.name not in CALENDAR_EVENTS | CHANNEL_EVENTS
            and UUID(str(e.record.get("job_id"))) not in self.calendars
            and UUID(str(e.record.get("job_id"))) not in self.channels], run_events)

    def _apply_channel(self, name: str, r: Mapping[str, Any]) -> None:
        cid = UUID(str(r["channel_id"]))
        if name == ChannelEvent.CREATED:
            self.channels[cid] = Channel.restore(
                cid, r["version"], r["at"], r["at"], tenant=r["tenant"], name=r["name"],
                kind=ChannelKind(r["kind"]), target=r["target"],
                recipients=tuple(r["recipients"]), description=r["description"],
                is_default=r["is_default"], secret_rotation=0, deleted=False)
            return
        held = self.channels[cid]
        held._version = r["version"]
        if name == ChannelEvent.UPDATED:
            held.target, held.recipients = r["target"], tuple(r["recipients"])
            held.description, held.is_default = r["description"], r["is_default"]
        elif name == ChannelEvent.SECRET_ROTATED:
            held.secret_rotation = r["secret_rotation"]
        elif name == ChannelEvent.RESTORED:
            held.kind, held.target = ChannelKind(r["kind"]), r["target"]
            held.recipients, held.description = tuple(r["recipients"]), r["description"]
            held.is_default, held.secret_rotation = r["is_default"], r["secret_rotation"]
            held.deleted = False
        else:
            held.deleted, held.is_default = True, False

    def _apply_calendar(self, name: str, r: Mapping[str, Any]) -> None:
        cid = UUID(str(r["calendar_id"]))
        held = self.calendars.get(cid)
        if name in (CalendarEvent.CREATED, CalendarEvent.UPDATED):
            exclusions = Exclusions(tuple(DateRange(x["first"], x["last"])
                                          for x in r["exclusions"]))
            self.calendars[cid] = Calendar.restore(
                cid, r["version"], r["at"], r["at"], tenant=r["tenant"], name=r["name"],
                description=r["description"], exclusions=exclusions,
                subscribers=held.subscribers if held else frozenset())
        elif held is not None:
            job = UUID(str(r["job_id"]))
            held.subscribers = (held.subscribers | {job} if name == CalendarEvent.JOB_SUBSCRIBED
                                else held.subscribers - {job})


class ChannelStore(CalendarStore):
    """The calendar store, also keeping the request ids taken on channels' ids (as the
    projection's requests table does), so that a retried channel command is recognised."""

    def __init__(self) -> None:
        super().__init__()
        self.channel_requests: dict[tuple[UUID, str], StoredRequest] = {}

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None:
        return self.channel_requests.get((job_id, request_id))

    def apply_partition(self, partition: int, epoch: int, job_events: Sequence[Produced],
                        run_events: Sequence[Produced]) -> None:
        super().apply_partition(partition, epoch, job_events, run_events)
        for e in job_events:
            r = e.record
            if e.name == "JobRequestApplied" and UUID(str(r["job_id"])) in self.channels:
                self.channel_requests.setdefault(
                    (UUID(str(r["job_id"])), str(r["request_id"])),
                    StoredRequest(str(r["command"]), str(r["request_digest"]),
                                  int(r["version"])))
