"""What the console needs from the outside: the api (as a gRPC client, so authentication
and tenant scoping stay the api's) and the run history (read-only, for charts)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from cronlog.fleet.announcement import WorkerAnnouncement


class ApiRefused(Exception):
    """The api refused a call: its status name, reason and the field it named, if any."""

    def __init__(self, code: str, reason: str, field_name: str = "") -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.field_name = field_name


class HistoryUnavailable(Exception):
    """The run history could not be read; the pages show what they have without charts."""


@dataclass(frozen=True)
class Credentials:
    """Who the console calls the api as: a tenant's bearer token, or (api without tokens, a
    developer machine) no token and the tenant picked at sign-in."""

    token: str | None
    tenant: str


@dataclass(frozen=True)
class JobSummary:
    job_id: str
    name: str
    tenant: str
    queue: str
    handler: str
    schedule: str  # the cron expression, "at <instant>" or "after <ids>", as written
    schedule_kind: str  # cron, at, after, every
    time_zone: str
    status: str  # active, paused, completed, deleted
    version: int
    next_fire_at: datetime | None
    last_fired_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    labels: Mapping[str, str] = field(default_factory=dict)
    payload: bytes = b""
    timeout_seconds: float = 0.0
    max_attempts: int = 0
    misfire_policy: str = ""
    overlap_policy: str = ""
    start_at: datetime | None = None
    end_at: datetime | None = None
    dependents: tuple[str, ...] = ()
    # An interval job's interval (schedule_kind every), else zero.
    every: timedelta = timedelta(0)
    # Excluded days as the spec writes them, and the calendar it names (issue 20).
    exclusions: tuple[str, ...] = ()
    calendar: str = ""


@dataclass(frozen=True)
class AttemptSummary:
    number: int
    status: str
    worker: str
    dispatched_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    start_lag_seconds: float | None
    output: bytes
    output_truncated: bool
    error: str
    # The attempt's last progress: its handler's heartbeat details, and when it gave them.
    progress: bytes = b""
    progress_at: datetime | None = None


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    job_id: str
    tenant: str
    status: str
    trigger: str
    scheduled_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    start_lag_seconds: float | None
    reason: str
    idempotency_key: str
    attempts: tuple[AttemptSummary, ...] = ()


@dataclass(frozen=True)
class NewJob:
    """What the create form asks; everything else takes the api's defaults."""

    name: str
    handler: str
    queue: str
    cron: str
    time_zone: str
    payload: bytes
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobChange:
    """What the update form sets; everything else (retries, timeouts, bounds, policies) stays
    as the job has it. cron is None for a job that is not a cron job: its schedule stays."""

    name: str
    handler: str
    queue: str
    cron: str | None
    time_zone: str
    payload: bytes
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WhatIfSummary:
    """What a change would have done over the job's recent real history (WhatIf,
    docs/verify.md "What if"): each list its first items, each count all of them."""

    since: datetime
    until: datetime
    current: int
    proposed: int
    added: Sequence[datetime]
    added_count: int
    removed: Sequence[datetime]
    removed_count: int
    late_count: int
    missed: Sequence[tuple[datetime, str]]
    missed_count: int
    overlapping_count: int
    # (local day, offset change, fire times that day)
    dst_days: Sequence[tuple[str, str, int]]
    # (top of the hour, fire times added less removed)
    top_of_hour: Sequence[tuple[datetime, int]]


@dataclass(frozen=True)
class JobQuery:
    """Which jobs a list shows; the api filters (ListJobs), so a page is one call however
    rare the matches. Empty fields select everything."""

    statuses: tuple[str, ...] = ()  # active, paused, completed
    queue: str = ""
    # (key, value); a None value: the key with any value.
    labels: tuple[tuple[str, str | None], ...] = ()
    name_contains: str = ""


ANY_JOB = JobQuery()


@dataclass(frozen=True)
class JobPage:
    jobs: Sequence[JobSummary]
    next_page_token: str


@dataclass(frozen=True)
class RunPage:
    runs: Sequence[RunSummary]
    next_page_token: str


class JobsApi(Protocol):
    """The gRPC api, called as the signed-in tenant. Every method raises ApiRefused."""

    def probe_open(self) -> bool:
        """Whether the api answers a call without a token (it runs without tenant tokens)."""
        ...

    def list_jobs(self, who: Credentials, page_size: int, page_token: str,
                  query: JobQuery = ANY_JOB) -> JobPage: ...

    def get_job(self, who: Credentials, job_id: str) -> JobSummary: ...

    def create_job(self, who: Credentials, request_id: str, job: NewJob) -> JobSummary: ...

    def pause_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary: ...

    def resume_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary: ...

    def delete_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary: ...

    def trigger_job(self, who: Credentials, request_id: str, job_id: str) -> RunSummary: ...

    def update_job(self, who: Credentials, request_id: str, job_id: str,
                   version: int, change: JobChange) -> JobSummary:
        """Applies change on top of the job as it is; FAILED_PRECONDITION when the job is no
        longer at `version` (it was changed since the form was filled; a fire does not
        change a job's version)."""
        ...

    def what_if(self, who: Credentials, job_id: str, change: JobChange, since: datetime,
                until: datetime) -> WhatIfSummary:
        """What `change` on top of the job as it is would have done over [since, until)."""
        ...

    def restore_job(self, who: Credentials, request_id: str, job_id: str, version: int,
                    skip_missed: bool) -> JobSummary:
        """The job with the spec it had at `version`, back if deleted or completed."""
        ...

    def backfill_job(self, who: Credentials, request_id: str, job_id: str, start: datetime,
                     end: datetime) -> Sequence[str]:
        """Runs for the job's fire times after start and not after end; their run ids."""
        ...

    def list_runs(self, who: Credentials, job_id: str, page_size: int,
                  page_token: str) -> RunPage: ...

    def get_run(self, who: Credentials, run_id: str) -> RunSummary: ...

    def cancel_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary: ...

    def redrive_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary:
        """A dead-lettered run's new series of attempts, under its own run id."""

    def preview(self, who: Credentials, job: JobSummary, after: datetime,
                count: int) -> Sequence[datetime]:
        """The job's next fire times from its schedule, exclusions and calendar."""

    def list_workers(self, who: Credentials) -> Sequence[WorkerAnnouncement]:
        """The live workers, by id, as the caller may see them (a tenant gets no host)."""
        ...

    def list_alert_deliveries(self, who: Credentials, job_id: str,
                              page_size: int) -> Sequence[DeliveryLine]:
        """The job's newest `page_size` delivery attempts of its alerts, newest first."""
        ...


@dataclass(frozen=True)
class DeliveryLine:
    """One attempt of one alert's delivery to a channel (the history's alert_deliveries)."""

    sent_at: datetime | None
    kind: str
    channel_name: str
    channel_kind: str
    attempt: int
    outcome: str
    status_code: int
    latency_ms: int
    error: str
    digest_count: int = 0


@dataclass(frozen=True)
class MinutePoint:
    minute: datetime
    values: Mapping[str, float]


@dataclass(frozen=True)
class LastRun:
    status: str
    scheduled_at: datetime
    start_lag_seconds: float | None


@dataclass(frozen=True)
class FailingJob:
    job_id: str
    runs: int
    failed_runs: int


@dataclass(frozen=True)
class JobEventLine:
    """One event of a job's log as `cronlog audit job` words it (the history's job_events)."""

    at: datetime
    version: int
    event: str
    request_id: str
    actor: str
    summary: str


@dataclass(frozen=True)
class MinuteOfHourLoad:
    """Runs due at one minute of the (UTC) hour over a window: the top-of-hour load."""

    minute: int
    runs: int
    runs_per_hour: float


class RunHistory(Protocol):
    """The ClickHouse run history, read-only; every query is filtered to one tenant.
    Every method raises HistoryUnavailable."""

    def runs_per_minute(self, tenant: str, since: datetime) -> Sequence[MinutePoint]:
        """Per minute: distinct runs by run status."""
        ...

    def start_lag_per_minute(self, tenant: str, since: datetime,
                             job_id: str = "") -> Sequence[MinutePoint]:
        """Per minute: p50 and p99 start lag in seconds (keys "p50", "p99")."""
        ...

    def duration_per_minute(self, tenant: str, since: datetime,
                            job_id: str) -> Sequence[MinutePoint]:
        """Per minute: p50 and max attempt duration in seconds (keys "p50", "max")."""
        ...

    def last_runs(self, tenant: str, job_ids: Sequence[str]) -> Mapping[str, LastRun]: ...

    def top_failing(self, tenant: str, since: datetime, limit: int) -> Sequence[FailingJob]: ...

    def dead_letters(self, tenant: str, since: datetime) -> int: ...

    def job_timeline(self, tenant: str, job_id: str, limit: int) -> Sequence[JobEventLine]:
        """The job's newest `limit` events, newest first."""
        ...

    def top_of_hour(self, tenant: str, since: datetime) -> Sequence[MinuteOfHourLoad]:
        """Runs scheduled since, by minute of the hour (minutes without runs left out)."""
        ...

    def tenants(self, limit: int) -> Sequence[str]:
        """Tenants with jobs, for open mode's tenant picker."""
        ...
