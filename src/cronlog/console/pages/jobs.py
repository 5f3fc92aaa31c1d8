"""The jobs page: the tenant's jobs, filtered, a page at a time, with their last runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import tzinfo

from cronlog.console.pages.common import When, schedule_in_words, when, zone
from cronlog.console.ports import (
    ApiRefused,
    Credentials,
    HistoryUnavailable,
    JobQuery,
    JobsApi,
    JobSummary,
    LastRun,
    RunHistory,
)

PAGE_SIZE = 50


# The statuses the jobs page filters by: ListJobs never lists deleted jobs.
JOB_STATUSES = ("active", "paused", "completed")


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
