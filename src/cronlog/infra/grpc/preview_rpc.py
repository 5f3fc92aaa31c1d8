"""PreviewSchedule: the next fire times of a schedule that need not be a job's, with the
words and DST notes that explain them; refused for what a job would be refused for."""

from __future__ import annotations

from datetime import datetime

from cronlog.commands.api.calendar_api import CalendarApi
from cronlog.domain.bounds import MOST_PREVIEWED, require_count
from cronlog.domain.errors import InvalidSpec, ScheduleTooCostly
from cronlog.domain.exclusions import ExcludingSchedule
from cronlog.domain.schedule import (
    BoundedSchedule,
    CronSchedule,
    IntervalSchedule,
    Schedule,
    preview,
    zone_named,
)
from cronlog.domain.schedule_explained import describe, explain
from cronlog.infra.grpc import calendar_rpcs, convert
from cronlog.v1 import job_service_pb2 as pb

MAX_PREVIEW = MOST_PREVIEWED


def preview_schedule(request: pb.PreviewScheduleRequest, calendars: CalendarApi | None,
                     caller: str | None, now: datetime) -> pb.PreviewScheduleResponse:
    require_count(request.count, "count", MAX_PREVIEW)
    zone_name = request.time_zone or "UTC"
    zone = zone_named(zone_name, "time_zone")
    # The same range a job's times must keep: a preview answers what a job would do.
    start = (convert.instant_in(request.start_at, "start_at")
             if request.HasField("start_at") else None)
    schedule: Schedule
    if request.HasField("every"):
        if request.cron:
            raise InvalidSpec("every", "give a cron expression or an interval, not both")
        schedule = IntervalSchedule.checked(convert.every_in(request.every, "every"),
                                            start, field="every")
    else:
        # Invariant 12: what a job would be refused for, a preview is too.
        schedule = CronSchedule.parse(request.cron, zone_name, field="cron",
                                      zone_field="time_zone").admitted("cron")
    end = (convert.instant_in(request.end_at, "end_at")
           if request.HasField("end_at") else None)
    if start or end:
        schedule = BoundedSchedule(schedule, start, end)
    after = (convert.instant_in(request.after, "after") if request.HasField("after")
             else now)
    excluded, excluded_words = calendar_rpcs.preview_exclusions(calendars, caller, request)
    # Times from the schedule without the excluded days; words and DST notes from
    # the schedule itself, which they describe.
    firing = ExcludingSchedule(schedule, excluded, zone) if excluded else schedule
    try:
        # At most MOST_PREVIEWED searches, each within schedule_search's bound.
        times = preview(firing, after, request.count or 10)
    except ScheduleTooCostly as exc:
        raise ScheduleTooCostly(
            ("calendar" if request.calendar else "exclusions") if excluded else "cron",
            exc.message) from exc
    description = describe(schedule, zone_name)
    if excluded_words:
        description += f"; not on the days of {excluded_words}"
    return convert.preview_out(explain(schedule, zone, after, times, description))
