"""Tables for people (`-o table`) of calendars and of the excluded days a job follows."""

from __future__ import annotations

from google.protobuf.message import Message

from cronlog.cli.tables import ABSENT, instant, table, with_next_page
from cronlog.v1 import job_service_pb2 as pb

CALENDAR_ANSWERS = (pb.CreateCalendarResponse, pb.UpdateCalendarResponse,
                    pb.GetCalendarResponse)
CALENDAR_COLUMNS = ("NAME", "TENANT", "VERSION", "JOBS", "EXCLUDED", "UPDATED", "DESCRIPTION")
EXCLUDED_COLUMNS = ("EXCLUDED DAYS",)
JOB_CALENDAR_COLUMNS = ("CALENDAR", "APPLIED VERSION", "FOUND", "OWN EXCLUDED DAYS")


def _calendar_row(calendar: pb.Calendar) -> tuple[str, ...]:
    return (calendar.name, calendar.tenant, str(calendar.version), str(calendar.jobs),
            str(len(calendar.exclusions)), instant(calendar.updated_at),
            calendar.description or ABSENT)


def calendar_table(message: Message) -> str | None:
    """The table of a calendar answer; None for any other answer."""
    if isinstance(message, pb.ListCalendarsResponse):
        return with_next_page(table(CALENDAR_COLUMNS, map(_calendar_row, message.calendars)),
                              message.next_page_token)
    if isinstance(message, CALENDAR_ANSWERS):
        calendar = message.calendar
        shown = table(CALENDAR_COLUMNS, [_calendar_row(calendar)])
        if calendar.exclusions:
            shown += "\n\n" + table(EXCLUDED_COLUMNS, ([d] for d in calendar.exclusions))
        return shown
    return None


def job_calendar_table(job: pb.Job) -> str | None:
    """What a job's fire times skip: its calendar as applied, and its own excluded days."""
    spec = job.spec
    if not spec.calendar and not spec.exclusions:
        return None
    applied = job.calendar if job.HasField("calendar") else None
    found = ABSENT if applied is None or not spec.calendar else (
        "yes" if applied.found else "no (fires as if it named none)")
    return table(JOB_CALENDAR_COLUMNS, [(
        spec.calendar or ABSENT,
        str(applied.version) if applied is not None and spec.calendar else ABSENT, found,
        ", ".join(spec.exclusions) or ABSENT)])
