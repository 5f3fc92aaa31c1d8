"""The Calendar aggregate (issue 20, docs/calendars.md): a tenant's named set of excluded
days that several jobs follow, versioned by its events like a job.

A calendar lives on the partition of its id (domain/exclusions.py, calendar_id), like a
job; its owner is its only writer. Its version counts what it excludes (created, then each
update): the jobs that follow it apply a version only when it is newer than theirs, and a
job subscribing or leaving does not change it, so that UpdateCalendar's expected_version
is not refused because a job came or went.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.errors import DomainError, InvalidSpec, StaleVersion
from cronlog.domain.exclusions import (
    Exclusions,
    calendar_id,
    validate_calendar_name,
    validate_description,
    validate_exclusions,
)
from cronlog.domain.spec import TENANT_PATTERN

# The jobs one calendar may publish to: an update sends one message to each in a single
# cycle, so this bounds that cycle (invariant 10). As many as a tenant's default job limit.
MAX_SUBSCRIBERS = 10_000


class CalendarExists(DomainError):
    """A calendar of that name exists already for the tenant."""

    status = "ALREADY_EXISTS"


class CalendarNotFound(DomainError):
    """No calendar of that name exists for the tenant."""

    status = "NOT_FOUND"


class CalendarFull(DomainError):
    """The calendar has as many subscribing jobs as it may."""

    status = "RESOURCE_EXHAUSTED"


class Calendar(CronlogAggregate):
    tenant: str
    name: str
    description: str
    exclusions: Exclusions
    # The jobs that follow this calendar: an update is published to each. Kept by the
    # owner beside the aggregate's events (CalendarJobSubscribed/Unsubscribed records).
    subscribers: frozenset[UUID]

    @staticmethod
    def create_id(calendar_id: UUID, **_: Any) -> UUID:
        return calendar_id

    @event("CalendarCreated")
    def __init__(self, calendar_id: UUID, tenant: str, name: str, description: str,
                 exclusions: Exclusions, request_id: str | None, timestamp: datetime) -> None:
        self.tenant = tenant
        self.name = name
        self.description = description
        self.exclusions = exclusions
        self.subscribers = frozenset()

    @classmethod
    def create(cls, tenant: str, name: str, description: str, exclusions: Exclusions,
               request_id: str | None, at: datetime) -> Calendar:
        if not TENANT_PATTERN.fullmatch(tenant):
            raise InvalidSpec("tenant", f"tenant {tenant[:40]!r} must match "
                                        f"{TENANT_PATTERN.pattern}")
        validate_calendar_name(name, "name")
        return cls(calendar_id=calendar_id(tenant, name), tenant=tenant, name=name,
                   description=validate_description(description),
                   exclusions=validate_exclusions(exclusions, "exclusions"),
                   request_id=request_id, timestamp=at)

    def update(self, description: str, exclusions: Exclusions, request_id: str | None,
               at: datetime, expected_version: int = -1) -> None:
        """Replaces the description and the exclusions; expected_version -1 means any."""
        if expected_version != -1 and expected_version != self.version:
            raise StaleVersion(f"calendar {self.name!r} is at version {self.version}, not "
                               f"{expected_version}")
        self._updated(tenant=self.tenant, name=self.name,
                      description=validate_description(description),
                      exclusions=validate_exclusions(exclusions, "exclusions"),
                      request_id=request_id, timestamp=at)

    # The tenant and name again, so that each event says whose calendar it changes.
    @event("CalendarUpdated")
    def _updated(self, tenant: str, name: str, description: str, exclusions: Exclusions,
                 request_id: str | None, timestamp: datetime) -> None:
        self.description = description
        self.exclusions = exclusions

    def subscribe(self, job_id: UUID) -> bool:
        """Adds a following job; False when it follows already."""
        if job_id in self.subscribers:
            return False
        if len(self.subscribers) >= MAX_SUBSCRIBERS:
            raise CalendarFull(f"calendar {self.name!r} is followed by {MAX_SUBSCRIBERS} "
                               "jobs already")
        self.subscribers = self.subscribers | {job_id}
        return True

    def unsubscribe(self, job_id: UUID) -> bool:
        """Removes a following job; False when it did not follow."""
        if job_id not in self.subscribers:
            return False
        self.subscribers = self.subscribers - {job_id}
        return True
