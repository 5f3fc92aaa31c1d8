"""The api side's ports in memory: a command bus that keeps what it sent and answers one
reply, the calendars table, job reads, and a JobApi on them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from cronlog.commands.api.job_api import JobApi
from cronlog.commands.api.ports import CalendarView
from cronlog.commands.messages import CommandMessage
from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.domain.catalogue import Command
from cronlog.domain.exclusions import Exclusions, calendar_id
from cronlog.domain.spec import JobSpec
from cronlog.infra.avro.event_mapping import spec_to_record
from tests.support.clock import FakeClock

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class RecordingBus:
    sent: list[tuple[str, str, Mapping[str, Any]]] = field(default_factory=list)
    reply: Mapping[str, Any] = field(default_factory=lambda: {"ok": True, "job_version": 1})
    # Where the owner's commit shows a calendar it created, if anywhere.
    shows: Calendars | None = None

    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        key, name, record = command.key, command.NAME, command.record()
        self.sent.append((key, name, record))
        if self.shows is not None and name == Command.CREATE_CALENDAR:
            self.shows.add(view(record["tenant"], record["name"]))
        return self.reply


def view(tenant: str, name: str, version: int = 1, *days: str) -> CalendarView:
    return CalendarView(tenant=tenant, name=name, calendar_id=calendar_id(tenant, name),
                        version=version, description="", exclusions=Exclusions.parse(
                            days, "exclusions"), subscribers=0, updated_at=NOW)


@dataclass
class Calendars:
    """The calendars table, keyed as it is: (tenant, name)."""

    rows: dict[tuple[str, str], CalendarView] = field(default_factory=dict)

    def add(self, calendar: CalendarView) -> None:
        self.rows[(calendar.tenant, calendar.name)] = calendar

    def calendar(self, tenant: str, name: str) -> CalendarView | None:
        return self.rows.get((tenant, name))

    def calendars(self, tenant: str, page_size: int,
                  page_token: str | None) -> tuple[list[CalendarView], str | None]:
        return sorted((v for (t, _), v in self.rows.items() if t == tenant),
                      key=lambda v: v.name)[:page_size], None

    def count_calendars(self, tenant: str) -> int:
        return sum(1 for t, _ in self.rows if t == tenant)


class SpecRecords:
    def to_record(self, spec: JobSpec) -> dict[str, Any]:
        return spec_to_record(spec)


class NoJobs:
    def get(self, job_id: UUID) -> Any:
        return None

    def run(self, run_id: UUID) -> Any:
        return None

    def count_jobs(self, tenant: str) -> int:
        return 0


@dataclass
class Row:
    version: int = 1


class CreatedJobs(NoJobs):
    def get(self, job_id: UUID) -> Any:
        return Row()


def job_api(bus: RecordingBus, calendars: Calendars | None, jobs: Any = None) -> JobApi:
    return JobApi(bus=bus, jobs=jobs or NoJobs(), queues=DeclaredQueues.of(("default",)),
                  specs=SpecRecords(), clock=FakeClock(NOW), read_your_write_timeout=0,
                  calendars=calendars)
