"""The partition owner: the only writer for the jobs of the inbox partitions it owns.

Each cycle reads a batch of inbox messages (commands, worker reports), fires the jobs that
are due within the lookahead, and writes all resulting events, dispatches and replies in one
Kafka transaction together with the inbox offsets. Only after that transaction commits are
the events applied to Postgres, fenced by the partition's epoch.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

from cronlog.commands.ports import Clock, InboundMessage, Record
from cronlog.domain.errors import DomainError
from cronlog.domain.job import Job
from cronlog.domain.run import Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outgoing:
    topic: str
    key: str
    name: str
    record: Record


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    name: str
    record: Record
    raw: bytes


@dataclass(frozen=True)
class Claim:
    partition: int
    epoch: int
    job_events_offset: int
    run_events_offset: int


class OwnerTransport(Protocol):
    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]: ...


class OwnerStore(Protocol):
    def take_epoch(self, partition: int, owner: str) -> Claim: ...

    def due_jobs(self, partitions: Iterable[int], horizon: datetime, limit: int) -> list[Job]: ...

    def job(self, job_id: UUID) -> Job | None: ...

    def run(self, run_id: UUID) -> Run | None: ...

    def request(self, request_id: str) -> tuple[UUID, int] | None: ...

    def apply(self, partition: int, epoch: int, job_events: Sequence[Produced],
              run_events: Sequence[Produced]) -> None: ...


class LogReplay(Protocol):
    def catch_up(self, claim: Claim) -> None: ...


class EventRecords(Protocol):
    def to_record(self, event: object) -> tuple[str, dict[str, Any]]: ...

    def spec_from_record(self, record: Mapping[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Topics:
    job_events: str
    run_events: str
    replies: str
    dispatch: Callable[[str], str]


@dataclass
class _Cycle:
    """What one owner cycle has loaded and changed; committed or dropped as a whole."""

    jobs: dict[UUID, Job] = field(default_factory=dict)
    runs: dict[UUID, Run] = field(default_factory=dict)
    replies: list[Outgoing] = field(default_factory=list)
    missing_jobs: set[UUID] = field(default_factory=set)


class PartitionOwner:
    def __init__(self, owner_id: str, transport: OwnerTransport, store: OwnerStore,
                 replay: LogReplay, records: EventRecords, clock: Clock, topics: Topics,
                 lookahead: timedelta, poll_timeout: float = 0.1, fire_chunk: int = 500,
                 rng: random.Random | None = None) -> None:
        self.owner_id = owner_id
        self._transport = transport
        self._store = store
        self._replay = replay
        self._records = records
        self._clock = clock
        self._topics = topics
        self._lookahead = lookahead
        self._poll_timeout = poll_timeout
        self._fire_chunk = fire_chunk
        self._rng = rng or random.Random()
        self.epochs: dict[int, int] = {}

    # -- ownership ---------------------------------------------------------------------
    def assigned(self, partitions: Sequence[int]) -> None:
        """Takes a new epoch for each partition and catches up before firing anything."""
        for partition in partitions:
            claim = self._store.take_epoch(partition, self.owner_id)
            self._replay.catch_up(claim)
            self.epochs[partition] = claim.epoch
            log.info("owner %s took partition %d at epoch %d", self.owner_id, partition,
                     claim.epoch)

    def revoked(self, partitions: Sequence[int]) -> None:
        for partition in partitions:
            self.epochs.pop(partition, None)

    # -- the cycle -----------------------------------------------------------------------
    def cycle(self) -> int:
        """Runs one cycle; returns how many messages it wrote."""
        messages = self._transport.poll(self._poll_timeout, 500)
        if not self.epochs:
            return 0
        now = self._clock.now()
        cycle = _Cycle()
        for message in messages:
            self._handle(message, now, cycle)
        self._fire_due(now, cycle)
        outgoing = self._outgoing(cycle)
        if not outgoing and not messages:
            return 0
        produced = self._transport.transact(outgoing)
        self._apply(produced)
        return len(outgoing)

    def _handle(self, message: InboundMessage, now: datetime, cycle: _Cycle) -> None:
        handler = {
            "CreateJob": self._create_job,
            "AttemptStartedReport": self._attempt_started,
            "AttemptFinishedReport": self._attempt_finished,
        }.get(message.name)
        if handler is None:
            request_id = message.record.get("request_id")
            if request_id:
                cycle.replies.append(self._reply(str(request_id), ok=False,
                                                 code="UNIMPLEMENTED",
                                                 message=f"{message.name} is not supported yet"))
            else:
                log.warning("ignoring inbox message %s at %d@%d", message.name,
                            message.partition, message.offset)
            return
        handler(message.record, now, cycle)

    def _reply(self, request_id: str, ok: bool, code: str | None = None,
               message: str | None = None, job_id: UUID | None = None,
               job_version: int | None = None) -> Outgoing:
        return Outgoing(self._topics.replies, request_id, "CommandReply", {
            "request_id": request_id, "ok": ok, "error_code": code, "error_message": message,
            "job_id": str(job_id) if job_id else None, "job_version": job_version,
        })

    def _load_job(self, job_id: UUID, cycle: _Cycle) -> Job | None:
        if job_id in cycle.jobs:
            return cycle.jobs[job_id]
        job = self._store.job(job_id)
        if job is not None:
            cycle.jobs[job_id] = job
        return job

    def _load_run(self, run_id: UUID, cycle: _Cycle) -> Run | None:
        if run_id in cycle.runs:
            return cycle.runs[run_id]
        run = self._store.run(run_id)
        if run is not None:
            cycle.runs[run_id] = run
        return run

    def _create_job(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        request_id = str(record["request_id"])
        job_id = UUID(str(record["job_id"]))
        existing = self._load_job(job_id, cycle)
        if existing is not None:
            # The job id derives from the request id: this is a retry; answer as the first time.
            cycle.replies.append(self._reply(request_id, ok=True, job_id=job_id,
                                             job_version=existing.version))
            return
        try:
            spec = self._records.spec_from_record(record["spec"])
            job = Job.create(job_id=job_id, spec=spec, request_id=request_id, at=now)
        except DomainError as exc:
            cycle.replies.append(self._reply(request_id, ok=False, code="INVALID_ARGUMENT",
                                             message=str(exc)))
            return
        cycle.jobs[job_id] = job
        cycle.replies.append(self._reply(request_id, ok=True, job_id=job_id,
                                         job_version=job.version))

    def _attempt_started(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        run = self._load_run(UUID(str(record["run_id"])), cycle)
        if run is None:
            log.warning("start report for unknown run %s", record["run_id"])
            return
        run.start(attempt=int(record["attempt"]), worker=str(record["worker"]),
                  started_at=record["started_at"], at=now)

    def _attempt_finished(self, record: Record, now: datetime, cycle: _Cycle) -> None:
        run = self._load_run(UUID(str(record["run_id"])), cycle)
        if run is None:
            log.warning("finish report for unknown run %s", record["run_id"])
            return
        common = {"attempt": int(record["attempt"]), "worker": str(record["worker"]),
                  "finished_at": record["finished_at"], "output": bytes(record["output"]),
                  "truncated": bool(record["output_truncated"]), "at": now}
        if record["outcome"] == "succeeded":
            run.succeed(**common)
            return
        job = self._load_job(run.job_id, cycle)
        if job is None:
            log.error("run %s belongs to unknown job %s", run.id, run.job_id)
            return
        run.fail(error=str(record.get("error") or "failed"), policy=job.spec.retry_policy,
                 timeout=job.spec.timeout, random_unit=self._rng.random(), **common)

    def _fire_due(self, now: datetime, cycle: _Cycle) -> None:
        horizon = now + self._lookahead
        for due in self._store.due_jobs(self.epochs, horizon, self._fire_chunk):
            job = cycle.jobs.setdefault(due.id, due)
            # A job due several times within the horizon fires each of them, in order.
            for _ in range(1000):
                if job.status != "active" or job.next_fire_at is None or job.next_fire_at > horizon:
                    break
                run = job.fire(now)
                cycle.runs[run.id] = run

    # -- output --------------------------------------------------------------------------
    def _outgoing(self, cycle: _Cycle) -> list[Outgoing]:
        out: list[Outgoing] = []
        for job in cycle.jobs.values():
            for event in job.collect_events():
                name, record = self._records.to_record(event)
                out.append(Outgoing(self._topics.job_events, str(job.id), name, record))
        for run in list(cycle.runs.values()):
            for event in run.collect_events():
                name, record = self._records.to_record(event)
                out.append(Outgoing(self._topics.run_events, str(run.job_id), name, record))
                if name == "AttemptDispatched":
                    owner_job = self._load_job(run.job_id, cycle)
                    if owner_job is None:
                        raise LookupError(f"run {run.id} dispatched for unknown job {run.job_id}")
                    out.append(self._dispatch(run, owner_job, record))
        out.extend(cycle.replies)
        return out

    def _dispatch(self, run: Run, job: Job, dispatched: Record) -> Outgoing:
        return Outgoing(self._topics.dispatch(run.queue), str(run.job_id), "Dispatch", {
            "run_id": str(run.id), "job_id": str(run.job_id), "attempt": dispatched["attempt"],
            "tenant": run.tenant, "handler": run.handler, "payload": job.spec.payload,
            "scheduled_at": run.scheduled_at, "not_before": dispatched["not_before"],
            "timeout_ms": dispatched["timeout_ms"],
            "heartbeat_timeout_ms": int(job.spec.heartbeat_timeout.total_seconds() * 1000),
            "idempotency_key": str(run.id),
        })

    def _apply(self, produced: Sequence[Produced]) -> None:
        by_partition: dict[int, tuple[list[Produced], list[Produced]]] = {}
        for p in produced:
            if p.topic == self._topics.job_events:
                by_partition.setdefault(p.partition, ([], []))[0].append(p)
            elif p.topic == self._topics.run_events:
                by_partition.setdefault(p.partition, ([], []))[1].append(p)
        for partition, (job_events, run_events) in by_partition.items():
            epoch = self.epochs.get(partition)
            if epoch is None:
                # Events for a partition this owner no longer holds: the next owner's
                # catch-up applies them from the log.
                continue
            job_events.sort(key=lambda e: e.offset)
            run_events.sort(key=lambda e: e.offset)
            self._store.apply(partition, epoch, job_events, run_events)
