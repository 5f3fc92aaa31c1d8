"""The api's side of calendars (issue 20, docs/calendars.md): validate, send CreateCalendar /
UpdateCalendar to the calendar's owner, read calendars back; and the snapshot of a named
calendar that a job's command carries.

Every call is scoped to one tenant: a calendar's id derives from (tenant, name), and every
read names the tenant, so no request reaches another tenant's calendar (invariant 10).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cronlog.commands import messages
from cronlog.commands.api.calendar_snapshot import date_ranges_record, named_calendar
from cronlog.commands.api.job_api import NotVisibleYet, require_ok, require_request_id
from cronlog.commands.api.ports import CalendarReader, CalendarView
from cronlog.commands.messages import CalendarCommand, CommandBus
from cronlog.domain.calendar import CalendarNotFound
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import (
    Exclusions,
    validate_calendar_name,
    validate_description,
)
from cronlog.domain.limits import TenantLimitReached
from cronlog.domain.spec import TENANT_PATTERN
from cronlog.ports import Clock

# A guard, like the jobs limit: a tenant's calendars are read and listed from one table, and
# each is a small aggregate on some owner. Two creates racing at the limit may both pass.
MAX_CALENDARS_PER_TENANT = 1000
# UpdateCalendar's expected_version in the command when the client accepts any version.
ANY_VERSION = -1


def require_tenant(tenant: str, field: str = "tenant") -> str:
    if not tenant:
        raise InvalidSpec(field, "a tenant is required")
    if not TENANT_PATTERN.fullmatch(tenant):
        raise InvalidSpec(field, f"tenant {tenant[:64]!r} must match {TENANT_PATTERN.pattern}")
    return tenant


@dataclass
class CalendarApi:
    bus: CommandBus
    calendars: CalendarReader
    clock: Clock
    reply_timeout: float = 15.0
    # How long to wait for the calendars table to show what the owner just committed.
    read_your_write_timeout: float = 5.0
    max_per_tenant: int = MAX_CALENDARS_PER_TENANT

    def create(self, request_id: str, tenant: str, name: str, description: str,
               exclusions: Sequence[str]) -> CalendarView:
        request_id = require_request_id(request_id)
        command = messages.CreateCalendar(
            request_id=request_id, tenant=tenant, name=name, at=self.clock.now(),
            **self._described(tenant, name, description, exclusions))
        if self.calendars.calendar(tenant, name) is None:
            # An existing one is the owner's to answer: the first outcome to a retry,
            # ALREADY_EXISTS to anyone else.
            count = self.calendars.count_calendars(tenant)
            if count >= self.max_per_tenant:
                raise TenantLimitReached(
                    f"tenant {tenant!r} has {count} calendars; its limit is "
                    f"{self.max_per_tenant}")
        return self._send(command)

    def update(self, request_id: str, tenant: str, name: str, description: str,
               exclusions: Sequence[str], expected_version: int) -> CalendarView:
        request_id = require_request_id(request_id)
        if expected_version < 0:
            raise InvalidSpec("expected_version", "must not be negative")
        return self._send(messages.UpdateCalendar(
            request_id=request_id, tenant=tenant, name=name, at=self.clock.now(),
            expected_version=expected_version or ANY_VERSION,
            **self._described(tenant, name, description, exclusions)))

    def get(self, tenant: str, name: str) -> CalendarView:
        require_tenant(tenant)
        validate_calendar_name(name, "name")
        found = self.calendars.calendar(tenant, name)
        if found is None:
            raise CalendarNotFound(f"calendar {name!r} not found")
        return found

    def list(self, tenant: str, page_size: int,
             page_token: str | None) -> tuple[list[CalendarView], str | None]:
        return self.calendars.calendars(require_tenant(tenant), page_size, page_token)

    def exclusions_of(self, tenant: str, name: str, field: str) -> Exclusions:
        """A calendar's exclusions for a preview; CalendarMissing naming `field` when the
        tenant has none of that name."""
        validate_calendar_name(name, field)
        return named_calendar(self.calendars, require_tenant(tenant), name, field).exclusions

    @staticmethod
    def _described(tenant: str, name: str, description: str,
                   exclusions: Sequence[str]) -> dict[str, Any]:
        """The calendar's description and days, checked."""
        require_tenant(tenant)
        validate_calendar_name(name, "name")
        validate_description(description, "description")
        parsed = Exclusions.parse(exclusions, "exclusions")
        return {"description": description,
                "exclusions": tuple(date_ranges_record(parsed))}

    def _send(self, command: CalendarCommand) -> CalendarView:
        reply = self.bus.send(command, self.reply_timeout)
        require_ok(reply)
        return self._wait_for(command.tenant, command.name,
                              int(reply.get("job_version") or 1))

    def _wait_for(self, tenant: str, name: str, version: int) -> CalendarView:
        deadline = time.monotonic() + self.read_your_write_timeout
        while True:
            found = self.calendars.calendar(tenant, name)
            if found is not None and found.version >= version:
                return found
            if time.monotonic() >= deadline:
                if found is not None:
                    return found
                raise NotVisibleYet(f"calendar {name!r} was accepted but is not visible yet; "
                                    "send the same request again (same request id) to read it")
            time.sleep(0.02)
