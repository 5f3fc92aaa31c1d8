"""What each console page shows, and what its actions do, through the ports alone.

Tenant scoping is the api's: every call is made with the signed-in tenant's token. In open
mode (an api without tokens, on a developer machine) there is no token to scope by, so the
pages pass the picked tenant to every list and treat another tenant's job or run as not
found: a convenience, not security (open mode has none)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronlog.console import charts
from cronlog.console.ports import (
    ApiRefused,
    Credentials,
    FailingJob,
    HistoryUnavailable,
    JobChange,
    JobEventLine,
    JobQuery,
    JobsApi,
    JobSummary,
    LastRun,
    NewJob,
    RunHistory,
    RunSummary,
)
from cronlog.domain.catalogue import JobEvent
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.schedule_words import describe_cron, describe_interval

PAGE_SIZE = 50
PREVIEW_COUNT = 10
RUN_STRIP = 30
# The job page's audit timeline: its newest events (docs/console.md, "Job").
TIMELINE_ENTRIES = 50
# The overview's top-of-hour load: a day of runs by minute of the hour (a week would read
# every run of it, as FAILING_WINDOW says).
TOP_OF_HOUR_WINDOW = timedelta(days=1)
# Output shown on the run page; the rest stays in the history (the api bounds it too).
OUTPUT_SHOWN = 64 * 1024
CHART_MINUTES = 60
# One slot per minute, the current one last.
CHART_WINDOW = timedelta(minutes=CHART_MINUTES - 1)
# A day: over 7 days these two queries read every run of the week (0.8 s for a million
# runs, docs/console.md); docs/analytics.md has the week-long versions.
FAILING_WINDOW = timedelta(days=1)
# The statuses the jobs page filters by: ListJobs never lists deleted jobs.
JOB_STATUSES = ("active", "paused", "completed")
ACTIONS = ("pause", "resume", "trigger", "delete")
# The interval the backfill form offers first: the last hour.
BACKFILL_DEFAULT = timedelta(hours=1)


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


@dataclass(frozen=True)
class JobFilter:
    status: str = ""
    queue: str = ""
    label: str = ""  # key=value, or key alone
    name: str = ""

    def query(self) -> JobQuery:
        """The api's filters (ListJobs does the filtering; it refuses a bad one by name)."""
        labels: tuple[tuple[str, str | None], ...] = ()
        if self.label:
            key, sep, value = self.label.partition("=")
            labels = ((key.strip(), value.strip() if sep else None),)
        return JobQuery(statuses=(self.status,) if self.status else (), queue=self.queue,
                        labels=labels, name_contains=self.name)

    @property
    def active(self) -> bool:
        return bool(self.status or self.queue or self.label or self.name)


@dataclass(frozen=True)
class JobRow:
    job: JobSummary
    words: str
    next_fire: When | None
    last_run: LastRun | None


@dataclass(frozen=True)
class JobsView:
    rows: Sequence[JobRow]
    next_page_token: str
    filters: JobFilter
    history_note: str
    # The api's refusal of the filters, with the field it named; no rows then.
    refused: str = ""


def _own(who: Credentials, tenant: str, what: str, ident: str) -> None:
    if who.token is None and tenant != who.tenant:
        raise ApiRefused("NOT_FOUND", f"{what} {ident} not found")


def job_of(api: JobsApi, who: Credentials, job_id: str) -> JobSummary:
    """The job for a form: the api's answer, and in open mode only the picked tenant's."""
    job = api.get_job(who, job_id)
    _own(who, job.tenant, "job", job_id)
    return job


def jobs_view(api: JobsApi, history: RunHistory, who: Credentials, filters: JobFilter,
              page_token: str, viewer_zone: tzinfo) -> JobsView:
    try:
        page = api.list_jobs(who, PAGE_SIZE, page_token, filters.query())
    except ApiRefused as exc:
        if exc.code != "INVALID_ARGUMENT":
            raise
        field = f" (field: {exc.field_name})" if exc.field_name else ""
        return JobsView([], "", filters, "", refused=exc.reason + field)
    found = [j for j in page.jobs if who.token is not None or j.tenant == who.tenant]
    token = page.next_page_token
    last: Mapping[str, LastRun] = {}
    note = ""
    tenant = found[0].tenant if found else who.tenant
    if found:
        try:
            last = history.last_runs(tenant, [j.job_id for j in found])
        except HistoryUnavailable as exc:
            note = f"run history unavailable: {exc}"
    rows = [JobRow(j, schedule_in_words(j),
                   when(j.next_fire_at, zone(j.time_zone), viewer_zone), last.get(j.job_id))
            for j in found]
    return JobsView(rows, token, filters, note)


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
    _own(who, job.tenant, "job", job_id)
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
    return JobView(job, schedule_in_words(job),
                   when(job.created_at, job_zone, viewer_zone),
                   when(job.next_fire_at, job_zone, viewer_zone), fire_times, note,
                   list(reversed(runs)), lag, duration, history_note, timeline=timeline,
                   timeline_note=timeline_note)


@dataclass(frozen=True)
class AttemptView:
    number: int
    status: str
    worker: str
    dispatched: When | None
    started: When | None
    finished: When | None
    start_lag_seconds: float | None
    output: str
    output_cut: bool
    output_truncated: bool
    error: str


@dataclass(frozen=True)
class RunView:
    run: RunSummary
    scheduled: When | None
    attempts: Sequence[AttemptView]
    cancellable: bool


def run_view(api: JobsApi, who: Credentials, run_id: str, viewer_zone: tzinfo) -> RunView:
    run = api.get_run(who, run_id)
    _own(who, run.tenant, "run", run_id)
    utc = UTC
    attempts = [AttemptView(a.number, a.status, a.worker, when(a.dispatched_at, utc, viewer_zone),
                            when(a.started_at, utc, viewer_zone),
                            when(a.finished_at, utc, viewer_zone), a.start_lag_seconds,
                            # Shown as text (escaped by the template); bytes that are not
                            # UTF-8 appear as replacement characters.
                            a.output[:OUTPUT_SHOWN].decode("utf-8", "replace"),
                            len(a.output) > OUTPUT_SHOWN, a.output_truncated, a.error)
                for a in run.attempts]
    return RunView(run, when(run.scheduled_at, utc, viewer_zone), attempts,
                   run.status in ("scheduled", "running"))


@dataclass(frozen=True)
class OverviewView:
    tenant: str
    runs_chart: charts.Chart | None
    lag_chart: charts.Chart | None
    top_failing: Sequence[FailingJob]
    dead_letters: int
    history_note: str
    top_of_hour: charts.Chart | None = None


def overview_view(history: RunHistory, tenant: str, now: datetime) -> OverviewView:
    if not tenant:
        return OverviewView(tenant, None, None, (), 0,
                            "no jobs yet: the overview shows your tenant's runs once it has some")
    since = now - CHART_WINDOW
    try:
        return OverviewView(
            tenant,
            charts.stacked_bars(history.runs_per_minute(tenant, since), start=since,
                                slots=CHART_MINUTES),
            charts.lines(history.start_lag_per_minute(tenant, since), ("p50", "p99"),
                         target=charts.LAG_TARGET_SECONDS, start=since, slots=CHART_MINUTES),
            history.top_failing(tenant, now - FAILING_WINDOW, 10),
            history.dead_letters(tenant, now - FAILING_WINDOW), "",
            charts.minute_of_hour_bars(history.top_of_hour(tenant, now - TOP_OF_HOUR_WINDOW)))
    except HistoryUnavailable as exc:
        return OverviewView(tenant, None, None, (), 0, f"run history unavailable: {exc}")


@dataclass(frozen=True)
class ActionDone:
    action: str
    request_id: str
    job: JobSummary | None
    run: RunSummary | None
    created_runs: Sequence[str] = ()

    @property
    def message(self) -> str:
        if self.action == "backfill":
            count = len(self.created_runs)
            return f"backfill: {count} run{'' if count == 1 else 's'} created"
        if self.action == "update" and self.job is not None:
            return f"updated: job {self.job.job_id} is at version {self.job.version}"
        if self.run is not None and self.action == "trigger":
            return f"triggered: run {self.run.run_id}"
        if self.run is not None:
            return f"{self.action}: run {self.run.run_id} is {self.run.status}"
        assert self.job is not None
        return f"{self.action}: job {self.job.job_id} is {self.job.status}"


def job_action(api: JobsApi, who: Credentials, action: str, job_id: str,
               request_id: str) -> ActionDone:
    if action not in ACTIONS:
        raise ApiRefused("INVALID_ARGUMENT", f"unknown action {action!r}", "action")
    # Open mode: the job must be the picked tenant's before anything is changed.
    if who.token is None:
        _own(who, api.get_job(who, job_id).tenant, "job", job_id)
    if action == "trigger":
        return ActionDone(action, request_id, None, api.trigger_job(who, request_id, job_id))
    act = {"pause": api.pause_job, "resume": api.resume_job, "delete": api.delete_job}[action]
    return ActionDone(action, request_id, act(who, request_id, job_id), None)


def cancel_run(api: JobsApi, who: Credentials, run_id: str, request_id: str) -> ActionDone:
    if who.token is None:
        _own(who, api.get_run(who, run_id).tenant, "run", run_id)
    return ActionDone("cancel", request_id, None, api.cancel_run(who, request_id, run_id))


def _labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for part in text.split(","):
        if part.strip():
            key, sep, value = part.partition("=")
            if not sep:
                raise ApiRefused("INVALID_ARGUMENT", "labels are key=value, separated by commas",
                                 "spec.labels")
            labels[key.strip()] = value.strip()
    return labels


def labels_text(labels: Mapping[str, str]) -> str:
    """Labels as the forms write them, for a form filled with the job's own."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def create_job(api: JobsApi, who: Credentials, form: Mapping[str, str],
               request_id: str) -> JobSummary:
    """Fields named as in JobSpec, so the api's errors name the form's field."""
    job = NewJob(name=form.get("name", "").strip(), handler=form.get("handler", "").strip(),
                 queue=form.get("queue", "").strip() or "default",
                 cron=form.get("cron", "").strip(), time_zone=form.get("time_zone", "").strip(),
                 payload=form.get("payload", "").encode(), labels=_labels(form.get("labels", "")))
    return api.create_job(who, request_id, job)


def update_job(api: JobsApi, who: Credentials, job_id: str, form: Mapping[str, str],
               request_id: str) -> ActionDone:
    """The update form: the fields of the create form, applied on top of the job, and the
    spec the form was filled from, so a change made meanwhile is refused, not lost."""
    shown = form.get("spec_fingerprint", "")
    if not shown:
        raise ApiRefused("INVALID_ARGUMENT", "the form does not say which spec it was filled "
                         "from: open the update form again", "spec_fingerprint")
    if who.token is None:
        _own(who, api.get_job(who, job_id).tenant, "job", job_id)
    cron = form.get("cron")
    change = JobChange(name=form.get("name", "").strip(), handler=form.get("handler", "").strip(),
                       queue=form.get("queue", "").strip() or "default",
                       cron=cron.strip() if cron is not None else None,
                       time_zone=form.get("time_zone", "").strip(),
                       payload=form.get("payload", "").encode(),
                       labels=_labels(form.get("labels", "")))
    return ActionDone("update", request_id,
                      api.update_job(who, request_id, job_id, shown, change), None)


def _instant(text: str, field_name: str) -> datetime:
    """An ISO 8601 instant from a form; without an offset it is UTC."""
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ApiRefused("INVALID_ARGUMENT", f"{text.strip()[:40]!r} is not an ISO 8601 time "
                         "such as 2026-03-28T09:00 or 2026-03-28T09:00+01:00",
                         field_name) from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def backfill_job(api: JobsApi, who: Credentials, job_id: str, form: Mapping[str, str],
                 request_id: str) -> ActionDone:
    """Runs for the job's fire times after `from` and not after `until` (the api bounds how
    many one request may create)."""
    start = _instant(form.get("from", ""), "from")
    end = _instant(form.get("until", ""), "until")
    if who.token is None:
        _own(who, api.get_job(who, job_id).tenant, "job", job_id)
    return ActionDone("backfill", request_id, None, None,
                      tuple(api.backfill_job(who, request_id, job_id, start, end)))


@dataclass(frozen=True)
class SignInView:
    open_mode: bool
    tenants: Sequence[str]


def sign_in_view(api: JobsApi, history: RunHistory) -> SignInView:
    if not api.probe_open():
        return SignInView(False, ())
    try:
        tenants = list(history.tenants(50))
    except HistoryUnavailable:
        tenants = []
    return SignInView(True, tenants)


def sign_in_with_token(api: JobsApi, token: str) -> Credentials:
    """Checks the token with the api (UNAUTHENTICATED for an unknown one) and names the
    tenant from its jobs when it has any."""
    who = Credentials(token.strip(), "")
    if not who.token:
        raise ApiRefused("UNAUTHENTICATED", "enter your tenant token", "token")
    page = api.list_jobs(who, 1, "")
    return Credentials(who.token, page.jobs[0].tenant if page.jobs else "")
