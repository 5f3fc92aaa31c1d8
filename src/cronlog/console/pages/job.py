"""The job page: its spec in words, its next fire times, its runs and its audit timeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from cronlog.console import charts
from cronlog.console.pages.common import (
    CHART_MINUTES,
    CHART_WINDOW,
    When,
    own,
    schedule_in_words,
    when,
    zone,
)
from cronlog.console.ports import (
    ApiRefused,
    Credentials,
    DeliveryLine,
    HistoryUnavailable,
    JobEventLine,
    JobsApi,
    JobSummary,
    RunHistory,
    RunSummary,
)
from cronlog.domain.catalogue import JobEvent

PREVIEW_COUNT = 10


RUN_STRIP = 30


# The job page's audit timeline: its newest events (docs/console.md, "Job").
TIMELINE_ENTRIES = 50
# The job page's alert deliveries: its newest attempts (docs/alerts.md, "What was delivered").
DELIVERY_ENTRIES = 20


@dataclass(frozen=True)
class FireTime:
    at: When
    # "UTC+01:00 → UTC+02:00" when the job's zone changed its offset since the previous one.
    offset_change: str


def _offset(at: datetime, job_zone: tzinfo) -> str:
    return at.astimezone(job_zone).strftime("UTC%z")


def next_fire_times(fire_times: Sequence[datetime], job_zone: tzinfo, viewer_zone: tzinfo,
                    now: datetime) -> list[FireTime]:
    previous = _offset(now, job_zone)
    shown: list[FireTime] = []
    for at in fire_times:
        offset = _offset(at, job_zone)
        change = f"{previous} → {offset}" if offset != previous else ""
        shown.append(FireTime(when(at, job_zone, viewer_zone), change))  # type: ignore[arg-type]
        previous = offset
    return shown


@dataclass(frozen=True)
class JobView:
    job: JobSummary
    words: str
    created: When | None
    next_fire: When | None
    fire_times: Sequence[FireTime]
    preview_note: str
    runs: Sequence[RunSummary]
    lag_chart: charts.Chart | None
    duration_chart: charts.Chart | None
    history_note: str
    timeline: Sequence[TimelineLine] = ()
    timeline_note: str = ""
    deliveries: Sequence[DeliveryLine] = ()
    deliveries_note: str = ""


@dataclass(frozen=True)
class TimelineLine:
    event: JobEventLine
    at: When | None


def fold_requests(events: Sequence[JobEventLine]) -> list[JobEventLine]:
    """Leaves out a JobRequestApplied whose request id another event shows: it only says
    the command's own event (JobPaused, JobUpdated...) took that id. One standing alone is a
    command that changed runs only (a trigger), and stays."""
    shown = {e.request_id for e in events if e.request_id and e.event != JobEvent.REQUEST_APPLIED}
    return [e for e in events if e.event != JobEvent.REQUEST_APPLIED or e.request_id not in shown]


def timeline_lines(history: RunHistory, tenant: str, job_id: str, job_zone: tzinfo,
                   viewer_zone: tzinfo) -> list[TimelineLine]:
    """The job's newest events, newest first, from the history's per-job index; tenant is
    the one the api answered the job for, never one from the request."""
    events = fold_requests(history.job_timeline(tenant, job_id, TIMELINE_ENTRIES))
    return [TimelineLine(e, when(e.at, job_zone, viewer_zone)) for e in events]


def job_view(api: JobsApi, history: RunHistory, who: Credentials, job_id: str,
             now: datetime, viewer_zone: tzinfo) -> JobView:
    job = api.get_job(who, job_id)
    own(who, job.tenant, "job", job_id)
    job_zone = zone(job.time_zone)
    fire_times: list[FireTime] = []
    note = ""
    if job.schedule_kind in ("cron", "every") and job.status == "active":
        try:
            times = api.preview(who, job, now, PREVIEW_COUNT)
            fire_times = next_fire_times(times, job_zone, viewer_zone, now)
        except ApiRefused as exc:
            note = f"preview refused: {exc.reason}"
    elif job.status != "active":
        note = f"the job is {job.status}: it does not fire"
    runs = api.list_runs(who, job_id, RUN_STRIP, "").runs
    lag = duration = None
    history_note = ""
    try:
        since = now - CHART_WINDOW
        lag = charts.lines(history.start_lag_per_minute(job.tenant, since, job_id), ("p50", "p99"),
                           target=charts.LAG_TARGET_SECONDS, start=since, slots=CHART_MINUTES)
        duration = charts.lines(history.duration_per_minute(job.tenant, since, job_id),
                                ("p50", "max"), start=since, slots=CHART_MINUTES)
    except HistoryUnavailable as exc:
        history_note = f"run history unavailable: {exc}"
    timeline: list[TimelineLine] = []
    timeline_note = ""
    try:
        timeline = timeline_lines(history, job.tenant, job.job_id, job_zone, viewer_zone)
    except HistoryUnavailable as exc:
        timeline_note = f"audit timeline unavailable: {exc}"
    deliveries: Sequence[DeliveryLine] = ()
    deliveries_note = ""
    try:
        # Through the api, as the runs: scoped and charged as the signed-in tenant's read.
        deliveries = api.list_alert_deliveries(who, job.job_id, DELIVERY_ENTRIES)
    except ApiRefused as exc:
        deliveries_note = f"alert deliveries unavailable: {exc.reason}"
    return JobView(job, schedule_in_words(job),
                   when(job.created_at, job_zone, viewer_zone),
                   when(job.next_fire_at, job_zone, viewer_zone), fire_times, note,
                   list(reversed(runs)), lag, duration, history_note, timeline=timeline,
                   timeline_note=timeline_note, deliveries=deliveries,
                   deliveries_note=deliveries_note)
