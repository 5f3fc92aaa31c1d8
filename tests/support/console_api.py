"""An in-memory JobsApi and RunHistory for the console's tests: tokens map to tenants
as the api's would, and another tenant's job or run is NOT_FOUND."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cronlog.console.ports import (
    ANY_JOB,
    ApiRefused,
    AttemptSummary,
    Credentials,
    DeliveryLine,
    FailingJob,
    HistoryUnavailable,
    JobChange,
    JobEventLine,
    JobPage,
    JobQuery,
    JobSummary,
    LastRun,
    MinuteOfHourLoad,
    MinutePoint,
    NewJob,
    RunPage,
    RunSummary,
    WhatIfSummary,
)
from cronlog.fleet.announcement import WorkerAnnouncement

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


def job(job_id: str, tenant: str = "alpha", **changes: object) -> JobSummary:
    base = JobSummary(job_id=job_id, name=f"job {job_id}", tenant=tenant, queue="default",
                      handler="echo", schedule="*/5 * * * *", schedule_kind="cron",
                      time_zone="Europe/Berlin", status="active", version=1,
                      next_fire_at=NOW + timedelta(minutes=5), last_fired_at=None,
                      created_at=NOW, updated_at=NOW)
    return replace(base, **changes)  # type: ignore[arg-type]


def run(run_id: str, job_id: str, tenant: str = "alpha", **changes: object) -> RunSummary:
    base = RunSummary(run_id=run_id, job_id=job_id, tenant=tenant, status="succeeded",
                      trigger="schedule", scheduled_at=NOW, started_at=NOW, finished_at=NOW,
                      start_lag_seconds=0.2, reason="", idempotency_key=run_id,
                      attempts=(AttemptSummary(1, "succeeded", "w1", NOW, NOW, NOW, 0.2,
                                               b"hello", False, ""),))
    return replace(base, **changes)  # type: ignore[arg-type]


def _matches(job: JobSummary, query: JobQuery) -> bool:
    """What ListJobs' filters select (the api does it in SQL)."""
    return ((not query.statuses or job.status in query.statuses)
            and (not query.queue or job.queue == query.queue)
            and query.name_contains.lower() in job.name.lower()
            and all(k in job.labels and (v is None or job.labels[k] == v)
                    for k, v in query.labels))


class FakeApi:
    def __init__(self, tokens: Mapping[str, str] | None = None) -> None:
        self.tokens = dict(tokens or {})  # token -> tenant; empty: open api
        self.jobs: dict[str, JobSummary] = {}
        self.runs: dict[str, RunSummary] = {}
        self.calls: list[tuple[str, str]] = []  # (method, request_id)
        self.list_calls = 0
        # (job id, line): the attempts ListAlertDeliveries would list, newest first.
        self.deliveries: list[tuple[str, DeliveryLine]] = []
        self.last_query: JobQuery | None = None
        self.preview_times: list[datetime] = []
        self.backfilled: tuple[datetime, datetime] | None = None
        self.workers: list[WorkerAnnouncement] = []

    def _tenant(self, who: Credentials) -> str | None:
        if not self.tokens:
            return None
        if who.token not in self.tokens:
            raise ApiRefused("UNAUTHENTICATED", "unknown bearer token")
        return self.tokens[who.token]

    def _job(self, who: Credentials, job_id: str) -> JobSummary:
        tenant = self._tenant(who)
        found = self.jobs.get(job_id)
        if found is None or (tenant is not None and found.tenant != tenant):
            raise ApiRefused("NOT_FOUND", f"job {job_id} not found")
        return found

    def probe_open(self) -> bool:
        return not self.tokens

    def list_jobs(self, who: Credentials, page_size: int, page_token: str,
                  query: JobQuery = ANY_JOB) -> JobPage:
        self.list_calls += 1
        self.last_query = query
        if any(s not in ("active", "paused", "completed") for s in query.statuses):
            raise ApiRefused("INVALID_ARGUMENT", "statuses: unknown job status", "statuses")
        tenant = self._tenant(who) or who.tenant or None
        mine = [j for j in self.jobs.values() if (tenant is None or j.tenant == tenant)
                and _matches(j, query)]
        start = int(page_token or 0)
        page = mine[start:start + page_size]
        more = start + page_size < len(mine)
        return JobPage(page, str(start + page_size) if more else "")

    def get_job(self, who: Credentials, job_id: str) -> JobSummary:
        return self._job(who, job_id)

    def create_job(self, who: Credentials, request_id: str, new: NewJob) -> JobSummary:
        tenant = self._tenant(who) or who.tenant
        if not new.cron:
            raise ApiRefused("INVALID_ARGUMENT", "a job needs a schedule", "spec.cron")
        created = job(f"j-{request_id}", tenant, name=new.name, schedule=new.cron,
                      time_zone=new.time_zone or "UTC", labels=dict(new.labels))
        self.jobs[created.job_id] = created
        self.calls.append(("create", request_id))
        return created

    def _set(self, who: Credentials, request_id: str, job_id: str, status: str,
             what: str) -> JobSummary:
        changed = replace(self._job(who, job_id), status=status)
        self.jobs[job_id] = changed
        self.calls.append((what, request_id))
        return changed

    def pause_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return self._set(who, request_id, job_id, "paused", "pause")

    def resume_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return self._set(who, request_id, job_id, "active", "resume")

    def delete_job(self, who: Credentials, request_id: str, job_id: str) -> JobSummary:
        return self._set(who, request_id, job_id, "deleted", "delete")

    def trigger_job(self, who: Credentials, request_id: str, job_id: str) -> RunSummary:
        found = self._job(who, job_id)
        made = run(f"r-{request_id}", job_id, found.tenant, status="scheduled", trigger="manual",
                   attempts=())
        self.runs[made.run_id] = made
        self.calls.append(("trigger", request_id))
        return made

    def update_job(self, who: Credentials, request_id: str, job_id: str,
                   version: int, change: JobChange) -> JobSummary:
        found = self._job(who, job_id)
        if found.version != version:
            raise ApiRefused("FAILED_PRECONDITION",
                             f"job {job_id} was changed since the form was filled")
        if change.cron == "":
            raise ApiRefused("INVALID_ARGUMENT", "a job needs a schedule", "spec.cron")
        changed = replace(found, name=change.name, handler=change.handler, queue=change.queue,
                          schedule=found.schedule if change.cron is None else change.cron,
                          time_zone=change.time_zone, payload=change.payload,
                          labels=dict(change.labels), version=found.version + 1)
        self.jobs[job_id] = changed
        self.calls.append(("update", request_id))
        return changed

    def what_if(self, who: Credentials, job_id: str, change: JobChange, since: datetime,
                until: datetime) -> WhatIfSummary:
        self._job(who, job_id)
        if change.cron == "":
            raise ApiRefused("INVALID_ARGUMENT", "a job needs a schedule", "spec.cron")
        self.calls.append(("what-if", change.cron or ""))
        hour = until.replace(minute=0, second=0, microsecond=0)
        return WhatIfSummary(since=since, until=until, current=168, proposed=336,
                             added=[hour], added_count=168, removed=[], removed_count=0,
                             late_count=0, missed=[(hour, "missed: <b>paused</b>")],
                             missed_count=1, overlapping_count=0,
                             dst_days=[("2026-03-29", "+1:00", 2)], top_of_hour=[(hour, 1)])

    def restore_job(self, who: Credentials, request_id: str, job_id: str, version: int,
                    skip_missed: bool) -> JobSummary:
        found = self._job(who, job_id)
        if not 1 <= version <= found.version:
            raise ApiRefused("INVALID_ARGUMENT", f"job {job_id} has versions 1 to "
                             f"{found.version}, not {version}", "version")
        restored = replace(found, status="active", version=found.version + 1)
        self.jobs[job_id] = restored
        self.calls.append(("restore", request_id))
        self.skipped_missed = skip_missed
        return restored

    def backfill_job(self, who: Credentials, request_id: str, job_id: str, start: datetime,
                     end: datetime) -> Sequence[str]:
        found = self._job(who, job_id)
        if end <= start:
            raise ApiRefused("INVALID_ARGUMENT", "must be after from", "until")
        hours = int((end - start).total_seconds() // 3600)
        made = [run(f"r-{request_id}-{i}", job_id, found.tenant, trigger="backfill")
                for i in range(hours)]
        self.runs.update({r.run_id: r for r in made})
        self.calls.append(("backfill", request_id))
        self.backfilled = (start, end)
        return [r.run_id for r in made]

    def list_runs(self, who: Credentials, job_id: str, page_size: int,
                  page_token: str) -> RunPage:
        self._job(who, job_id)
        return RunPage([r for r in self.runs.values() if r.job_id == job_id][:page_size], "")

    def get_run(self, who: Credentials, run_id: str) -> RunSummary:
        tenant = self._tenant(who)
        found = self.runs.get(run_id)
        if found is None or (tenant is not None and found.tenant != tenant):
            raise ApiRefused("NOT_FOUND", f"run {run_id} not found")
        return found

    def cancel_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary:
        changed = replace(self.get_run(who, run_id), status="cancelled")
        self.runs[run_id] = changed
        self.calls.append(("cancel", request_id))
        return changed

    def redrive_run(self, who: Credentials, request_id: str, run_id: str) -> RunSummary:
        found = self.get_run(who, run_id)
        if found.status != "dead_lettered":
            raise ApiRefused("FAILED_PRECONDITION", f"run {run_id} is {found.status}, not "
                                                    "dead-lettered")
        changed = replace(found, status="scheduled")
        self.runs[run_id] = changed
        self.calls.append(("redrive", request_id))
        return changed

    def preview(self, who: Credentials, job: JobSummary, after: datetime,
                count: int) -> Sequence[datetime]:
        self._tenant(who)
        return self.preview_times[:count]

    def list_workers(self, who: Credentials) -> Sequence[WorkerAnnouncement]:
        # The api's scoping is the api's (infra/grpc/worker_rpcs.py): a tenant gets no host.
        tenant = self._tenant(who)
        return [replace(w, host="") if tenant else w for w in self.workers]

    def list_alert_deliveries(self, who: Credentials, job_id: str,
                              page_size: int) -> Sequence[DeliveryLine]:
        # The api lists the caller's tenant's attempts only (alert_delivery_rpcs.py).
        self._job(who, job_id)
        return [d for j, d in self.deliveries if j == job_id][:page_size]


class FakeHistory:
    def __init__(self, available: bool = True) -> None:
        self.available = available
        self.asked_tenants: list[str] = []
        # (tenant, job id, event): the history's job_events.
        self.timeline: list[tuple[str, str, JobEventLine]] = []
        self.points = [MinutePoint(NOW - timedelta(minutes=2), {"succeeded": 3, "failed": 1}),
                       MinutePoint(NOW - timedelta(minutes=1), {"succeeded": 4})]

    def _check(self, tenant: str) -> None:
        self.asked_tenants.append(tenant)
        if not self.available:
            raise HistoryUnavailable("ClickHouse: connection refused")

    def runs_per_minute(self, tenant: str, since: datetime) -> Sequence[MinutePoint]:
        self._check(tenant)
        return self.points

    def start_lag_per_minute(self, tenant: str, since: datetime,
                             job_id: str = "") -> Sequence[MinutePoint]:
        self._check(tenant)
        return [MinutePoint(p.minute, {"p50": 0.1, "p99": 2.5}) for p in self.points]

    def duration_per_minute(self, tenant: str, since: datetime,
                            job_id: str) -> Sequence[MinutePoint]:
        self._check(tenant)
        return [MinutePoint(p.minute, {"p50": 1.0, "max": 3.0}) for p in self.points]

    def last_runs(self, tenant: str, job_ids: Sequence[str]) -> Mapping[str, LastRun]:
        self._check(tenant)
        return {j: LastRun("failed", NOW, 0.4) for j in job_ids}

    def top_failing(self, tenant: str, since: datetime, limit: int) -> Sequence[FailingJob]:
        self._check(tenant)
        return [FailingJob("j1", 10, 2)]

    def dead_letters(self, tenant: str, since: datetime) -> int:
        self._check(tenant)
        return 2

    def tenants(self, limit: int) -> Sequence[str]:
        self._check("")
        return ["alpha", "beta"]

    def job_timeline(self, tenant: str, job_id: str, limit: int) -> Sequence[JobEventLine]:
        self._check(tenant)
        events = [e for t, j, e in self.timeline if t == tenant and j == job_id]
        return sorted(events, key=lambda e: (e.version, e.event), reverse=True)[:limit]

    def top_of_hour(self, tenant: str, since: datetime) -> Sequence[MinuteOfHourLoad]:
        self._check(tenant)
        return [MinuteOfHourLoad(0, 120, 5.0), MinuteOfHourLoad(30, 24, 1.0)]
