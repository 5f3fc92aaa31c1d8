"""A writer of the Postgres state (projections/state.py's StateWriter) that takes no write: a
test's writer keeps the writes it looks at and inherits these, so that a write the test did
not expect fails it, naming the write."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.domain.exclusions import AppliedCalendar
from cronlog.projections.channel_state import ChannelChange
from cronlog.projections.state import CalendarRow, JobRow, RunRow, SettledSlot, WaitingEnd


class NoWrites:
    def insert_job(self, row: JobRow) -> None:
        raise AssertionError("unexpected insert_job")

    def update_job(self, job_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        raise AssertionError("unexpected update_job")

    def insert_run(self, row: RunRow) -> None:
        raise AssertionError("unexpected insert_run")

    def update_run(self, run_id: UUID, version: int, at: datetime,
                   changes: Mapping[str, Any]) -> None:
        raise AssertionError("unexpected update_run")

    def record_request(self, request_id: str, partition: int, job_id: UUID,
                       job_version: int, command: str | None = None,
                       digest: str | None = None) -> None:
        raise AssertionError("unexpected record_request")

    def set_dependents(self, job_id: UUID, dependents: tuple[UUID, ...]) -> None:
        raise AssertionError("unexpected set_dependents")

    def wait_with(self, end: WaitingEnd) -> None:
        raise AssertionError("unexpected wait_with")

    def settle(self, slot: SettledSlot) -> None:
        raise AssertionError("unexpected settle")

    def set_calendar(self, job_id: UUID, calendar: AppliedCalendar | None,
                     unless_named: str | None = None) -> None:
        raise AssertionError("unexpected set_calendar")

    def put_calendar(self, row: CalendarRow) -> None:
        raise AssertionError("unexpected put_calendar")

    def subscribe(self, calendar_id: UUID, job_id: UUID, partition: int,
                  subscribed: bool) -> None:
        raise AssertionError("unexpected subscribe")

    def change_channel(self, change: ChannelChange) -> None:
        raise AssertionError("unexpected change_channel")
