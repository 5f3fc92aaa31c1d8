"""What every console page shares: zones and times shown in the viewer's zone, and the
tenant check on a job the page names."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronlog.console.ports import ApiRefused, Credentials, JobsApi, JobSummary
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule_words import describe_cron, describe_interval

CHART_MINUTES = 60


# One slot per minute, the current one last.
CHART_WINDOW = timedelta(minutes=CHART_MINUTES - 1)


def zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name) if name else UTC
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def schedule_in_words(job: JobSummary) -> str:
    """The schedule in the words PreviewSchedule and the CLI use, without the zone (the
    table shows it apart); as written when it has none."""
    try:
        if job.schedule_kind == "cron":
            words = describe_cron(job.schedule, job.time_zone)
        elif job.schedule_kind == "every":
            words = describe_interval(job.every, job.start_at, job.time_zone)
        else:
            return job.schedule
    except InvalidSpec:
        return job.schedule
    return words.removesuffix(f", {job.time_zone}")


@dataclass(frozen=True)
class When:
    """One instant as the job's zone and the viewer's zone see it."""

    utc: datetime
    job_local: str
    viewer_local: str


def when(at: datetime | None, job_zone: tzinfo, viewer_zone: tzinfo) -> When | None:
    if at is None:
        return None
    return When(at, at.astimezone(job_zone).strftime("%Y-%m-%d %H:%M:%S %Z"),
                at.astimezone(viewer_zone).strftime("%Y-%m-%d %H:%M:%S %Z"))


def own(who: Credentials, tenant: str, what: str, ident: str) -> None:
    if who.token is None and tenant != who.tenant:
        raise ApiRefused("NOT_FOUND", f"{what} {ident} not found")


def job_of(api: JobsApi, who: Credentials, job_id: str) -> JobSummary:
    """The job for a form: the api's answer, and in open mode only the picked tenant's."""
    job = api.get_job(who, job_id)
    own(who, job.tenant, "job", job_id)
    return job
