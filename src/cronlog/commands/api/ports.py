"""What the api's side of the write path talks to (the owners' inbox and replies, the
state store's reads, the scheduler group), and the shapes those give back."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from cronlog.commands.messages import CommandMessage
from cronlog.domain.exclusions import Exclusions
from cronlog.domain.spec import JobSpec


class QueueCatalog(Protocol):
    def check(self, spec: JobSpec) -> None:
        """Raises InvalidSpec (spec.queue, spec.handler) unless the operator declared the
        job's queue and lets its tenant use that queue and handler."""


class JobReader(Protocol):
    def get(self, job_id: UUID) -> Any: ...

    def run(self, run_id: UUID) -> Any: ...

    def count_jobs(self, tenant: str) -> int: ...


class SpecHistory(Protocol):
    def spec_at(self, job_id: UUID, version: int) -> JobSpec | None:
        """The spec in force at the job's `version` (RestoreJob, issue 38); None when none
        is kept that far back."""


@dataclass(frozen=True)
class DeadLetter:
    """A dead-lettered run as the state store holds it (the `runs` table)."""

    run_id: UUID
    job_id: UUID
    scheduled_at: datetime


class DeadLetterReader(Protocol):
    def dead_letters(self, tenant: str, job_id: UUID | None, since: datetime,
                     until: datetime, limit: int) -> list[DeadLetter]:
        """At most `limit` dead-lettered runs of the tenant's jobs that are not deleted (of
        `job_id` alone when given) fired in [since, until), by fire time then run id."""


class SpecRecords(Protocol):
    def to_record(self, spec: JobSpec) -> dict[str, Any]: ...


class BatchCommandBus(Protocol):
    def send_many(self, commands: Sequence[CommandMessage],
                  timeout: float) -> list[Mapping[str, Any] | Exception]:
        """Each command's reply record, or the exception that stopped that command alone."""


class ExistingJobs(Protocol):
    def existing(self, job_ids: Collection[UUID]) -> set[UUID]: ...


@dataclass(frozen=True)
class CalendarView:
    """A calendar as the read side holds it (the `calendars` table)."""

    tenant: str
    name: str
    calendar_id: UUID
    version: int
    description: str
    exclusions: Exclusions
    # How many jobs follow it.
    subscribers: int
    updated_at: datetime


class CalendarReader(Protocol):
    def calendar(self, tenant: str, name: str) -> CalendarView | None: ...

    def calendars(self, tenant: str, page_size: int,
                  page_token: str | None) -> tuple[list[CalendarView], str | None]: ...

    def count_calendars(self, tenant: str) -> int: ...


@dataclass(frozen=True)
class ChannelView:
    """An alert channel as the read side holds it (the `channels` table, issue 37). No
    secret: one derives from the operator's key, channel_id and secret_rotation."""

    tenant: str
    name: str
    channel_id: UUID
    kind: str
    target: str
    recipients: tuple[str, ...]
    description: str
    is_default: bool
    secret_rotation: int
    version: int
    deleted: bool
    created_at: datetime
    updated_at: datetime


class ChannelReader(Protocol):
    def channel(self, tenant: str, name: str) -> ChannelView | None:
        """The tenant's channel of that name, deleted or not."""

    def channels(self, tenant: str, page_size: int,
                 page_token: str | None) -> tuple[list[ChannelView], str | None]:
        """The tenant's live channels in name order."""

    def count_channels(self, tenant: str) -> int:
        """The tenant's live channels."""


class UpstreamReader(Protocol):
    def upstreams(self, tenant: str, job_ids: Collection[UUID]) -> Mapping[UUID, tuple[UUID, ...]]:
        """Those of `job_ids` that are the tenant's jobs and not deleted, each with the jobs
        it runs after (empty for a job on a cron or 'at' schedule)."""


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    # The scheduler's instance id, as its consumer's client id shows it.
    scheduler: str


@dataclass(frozen=True)
class OwnerRecord:
    owner: str | None
    caught_up_member: str | None


class SchedulerGroup(Protocol):
    def members_by_partition(self) -> Mapping[int, GroupMember]:
        """The member each inbox partition is assigned to; unassigned ones are absent."""


class OwnerRecords(Protocol):
    def owner_records(self) -> Mapping[int, OwnerRecord]: ...


class CommandPath(Protocol):
    """The api's way to the owners and back: the inbox's producer and the reply reader."""

    def problems(self) -> Sequence[str]:
        """What keeps a command from reaching the log or its reply from coming back."""
