"""CreateJobs: many job creations in one call, each decided as CreateJob decides it.

Every item is checked as JobApi.create_job checks it (request id, spec, queue, tenant
limit, upstreams, calendar); the commands of the items that pass go to the inbox in waves
of at most WAVE commands, each wave's replies awaited before the next is sent, all within
one deadline. An item that fails gets its own error and nothing of it is sent; the others
go on (DESIGN invariant 9).

Why waves: an owner decides its inbox partitions in order, sharing each cycle between
tenants (commands/owner/inbox_shares.py): a tenant's messages past its share are deferred, and
another tenant's command read behind them overtakes them. An owner reads ahead of what it
has deferred only so far (infra/kafka/owner_transport.py, MOST_KEPT), so one wave of a
tenant's batches at a time in an api (TenantTurns) keeps what a tenant has waiting on the
owners bounded by the apis, not by what it sends. A wave of 32 (issue 33) kept another
tenant's CreateJob at 345 ms p99 behind the schedule-search bomb, but made a batch of
1,000 cost 32 round trips: 750-900 jobs/s at 8 partitions. Since the owner reads past its
deferred messages (issue 34) a wave of 256 keeps that CreateJob at 443 ms p99, and bulk
creation runs at 1,870-2,490 jobs/s (docs/bulk-import.md, "Rate").
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from cronlog.commands.api.calendar_snapshot import calendar_snapshot
from cronlog.commands.api.job_api import CommandRejected, JobApi, require_request_id
from cronlog.commands.api.ports import BatchCommandBus, ExistingJobs
from cronlog.commands.messages import CommandBus, CommandMessage, CreateJob
from cronlog.domain.errors import DomainError
from cronlog.domain.ids import job_id_for_request
from cronlog.domain.job import FIRST_REVISION
from cronlog.domain.spec import JobSpec, check_search_cost, validate_spec

log = logging.getLogger(__name__)

# Most items a batch may hold: bounds one call's work (invariant 10) and its reply wait.
MOST_ITEMS = 1000
# Most commands of one tenant's batches an api has waiting on owners at once, per inbox
# (Kafka) partition they spread over: what another tenant's command may find ahead of it in
# its partition from one api. 256 at 8 partitions; a whole batch from 32 partitions on.
WAVE_PER_PARTITION = 32
WAVE = 8 * WAVE_PER_PARTITION


def wave_for(inbox_partitions: int) -> int:
    """The wave of an api whose commands spread over `inbox_partitions` partitions."""
    return max(1, min(MOST_ITEMS, WAVE_PER_PARTITION * inbox_partitions))
# Tenants share this many turns (a tenant's turn is its name's stripe): memory bounded
# whatever names open mode is sent; two tenants on one stripe take turns with each other.
TURN_STRIPES = 256

class OneByOne:
    """A batch bus over a bus that sends one command at a time (tests, other transports)."""

    def __init__(self, bus: CommandBus) -> None:
        self._bus = bus

    def send_many(self, commands: Sequence[CommandMessage],
                  timeout: float) -> list[Mapping[str, Any] | Exception]:
        replies: list[Mapping[str, Any] | Exception] = []
        deadline = time.monotonic() + timeout
        for command in commands:
            try:
                replies.append(self._bus.send(command, max(0.05, deadline - time.monotonic())))
            except Exception as exc:
                replies.append(exc)
        return replies


def batch_bus(bus: CommandBus | BatchCommandBus) -> BatchCommandBus:
    """The bus itself when it sends batches, else one command at a time through it."""
    if callable(getattr(bus, "send_many", None)):
        return bus  # type: ignore[return-value]
    return OneByOne(bus)  # type: ignore[arg-type]


@dataclass(frozen=True)
class BatchItem:
    """One item of a batch: its request id and its spec, already converted."""

    request_id: str
    spec: JobSpec


@dataclass(frozen=True)
class ItemCreated:
    job_id: UUID
    version: int
    # Created before this batch by the same request id, or by an earlier item of it.
    already_existed: bool


# An item's outcome: the job, or why not (a domain error, the owner's refusal, or the
# transport's own error for this command), for the edge to turn into a status.
ItemOutcome = ItemCreated | Exception


class ItemNotSent(DomainError):
    """The batch's deadline passed before the item's turn came: nothing of it was sent."""

    status = "UNAVAILABLE"


class TenantTurns:
    """One wave of a tenant's batch commands at a time in this api (one per stripe), of at
    most `wave` commands."""

    def __init__(self, stripes: int = TURN_STRIPES, wave: int = WAVE) -> None:
        self._locks = [threading.Lock() for _ in range(stripes)]
        self.wave = wave

    def of(self, tenant: str) -> threading.Lock:
        return self._locks[zlib.crc32(tenant.encode()) % len(self._locks)]


@dataclass
class JobBatch:
    api: JobApi
    bus: BatchCommandBus
    existing: ExistingJobs
    turns: TenantTurns = field(default_factory=TenantTurns)

    def create_jobs(self, items: Sequence[BatchItem]) -> list[ItemOutcome]:
        outcomes: list[ItemOutcome | None] = [None] * len(items)
        checked: dict[int, tuple[UUID, JobSpec, str]] = {}
        for index, item in enumerate(items):
            try:
                request_id = require_request_id(item.request_id)
                spec = validate_spec(item.spec)
                checked[index] = (job_id_for_request(spec.tenant, request_id), spec, request_id)
            except Exception as exc:
                outcomes[index] = exc
        existed = self.existing.existing({job_id for job_id, _, _ in checked.values()})
        counts: dict[str, int] = {}
        # Each tenant's channels, read once for the batch (commands/api/notify_check.py).
        channels: dict[str, frozenset[str]] = {}
        seen: set[UUID] = set()
        retried: dict[int, bool] = {}
        commands: list[CommandMessage] = []
        sent: list[int] = []
        now = self.api.clock.now()
        for index, (job_id, spec, request_id) in checked.items():
            retry = job_id in existed or job_id in seen
            try:
                command = self._command(job_id, spec, request_id, retry, counts, channels,
                                        now)
            except Exception as exc:
                outcomes[index] = exc
                continue
            seen.add(job_id)
            retried[index] = retry
            commands.append(command)
            sent.append(index)
        replies = self._send(commands, [checked[i][1].tenant for i in sent])
        for index, reply in zip(sent, replies, strict=True):
            outcomes[index] = self._outcome(reply, checked[index][0], retried[index])
        return [o if o is not None else RuntimeError("not decided") for o in outcomes]

    def _send(self, commands: Sequence[CommandMessage],
              tenants: Sequence[str]) -> list[Mapping[str, Any] | Exception]:
        """Each command's reply, or what stopped it: sent a wave at a time per tenant, in
        the tenant's turn, all by one deadline."""
        replies: list[Mapping[str, Any] | Exception] = [
            ItemNotSent("the batch's deadline passed before this item was sent; send it "
                        "again with its request id")] * len(commands)
        deadline = time.monotonic() + self.api.reply_timeout
        by_tenant: dict[str, list[int]] = {}
        for index, tenant in enumerate(tenants):
            by_tenant.setdefault(tenant, []).append(index)
        for tenant, indexes in by_tenant.items():
            turn = self.turns.of(tenant)
            size = self.turns.wave
            for start in range(0, len(indexes), size):
                wave = indexes[start:start + size]
                left = deadline - time.monotonic()
                if left <= 0 or not turn.acquire(timeout=left):
                    break
                try:
                    answers = self.bus.send_many([commands[i] for i in wave],
                                                 max(0.05, deadline - time.monotonic()))
                finally:
                    turn.release()
                for index, answer in zip(wave, answers, strict=True):
                    replies[index] = answer
        return replies

    def _command(self, job_id: UUID, spec: JobSpec, request_id: str, retry: bool,
                 counts: dict[str, int], channels: dict[str, frozenset[str]],
                 now: Any) -> CreateJob:
        """The item's CreateJob command, after CreateJob's checks for it."""
        api = self.api
        if not retry:
            if spec.tenant not in counts:
                counts[spec.tenant] = api.jobs.count_jobs(spec.tenant)
            # The batch's own new jobs count too, so a batch cannot step over the limit.
            api.limits.check_new_job(spec.tenant, counts[spec.tenant])
        api.queues.check(spec)
        if not retry:
            api.check_after(job_id, spec)
            api.check_notify(spec, channels)
        snapshot = calendar_snapshot(api.calendars, spec, spec.calendar if retry else None)
        check_search_cost(spec, snapshot.exclusions, now)
        if not retry:
            counts[spec.tenant] += 1
        return CreateJob(request_id=request_id, job_id=job_id, at=now,
                         spec=api.specs.to_record(spec), **snapshot.fields())

    @staticmethod
    def _outcome(reply: Mapping[str, Any] | Exception, job_id: UUID,
                 retry: bool) -> ItemOutcome:
        if isinstance(reply, Exception):
            return reply
        if not reply["ok"]:
            field = reply.get("error_field")
            return CommandRejected(str(reply.get("error_code") or "INTERNAL"),
                                   str(reply.get("error_message") or "command rejected"),
                                   str(field) if field else None)
        # The owner says whether the request id was answered before (v3 replies); the api's
        # own Postgres read may run before the owner applied the first create.
        return ItemCreated(job_id, FIRST_REVISION, retry or bool(reply.get("repeated")))
