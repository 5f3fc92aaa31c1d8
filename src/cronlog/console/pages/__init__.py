"""What each console page shows, and what its actions do, through the ports alone.

Tenant scoping is the api's: every call is made with the signed-in tenant's token. In open
mode (an api without tokens, on a developer machine) there is no token to scope by, so the
pages pass the picked tenant to every list and treat another tenant's job or run as not
found: a convenience, not security (open mode has none)."""

from cronlog.console.pages.actions import (
    ACTIONS,
    BACKFILL_DEFAULT,
    backfill_job,
    cancel_run,
    create_job,
    job_action,
    labels_text,
    redrive_run,
    restore_job,
    run_action,
    update_job,
    what_if_of,
)
from cronlog.console.pages.common import job_of, schedule_in_words, when, zone
from cronlog.console.pages.job import (
    PREVIEW_COUNT,
    TIMELINE_ENTRIES,
    fold_requests,
    job_view,
    next_fire_times,
)
from cronlog.console.pages.jobs import JOB_STATUSES, PAGE_SIZE, JobFilter, jobs_view
from cronlog.console.pages.overview import overview_view
from cronlog.console.pages.run import OUTPUT_SHOWN, run_view
from cronlog.console.pages.sign_in import SignInView, sign_in_view, sign_in_with_token
from cronlog.console.pages.workers import WorkersView, workers_view

__all__ = [
    "ACTIONS",
    "BACKFILL_DEFAULT",
    "JOB_STATUSES",
    "OUTPUT_SHOWN",
    "PAGE_SIZE",
    "PREVIEW_COUNT",
    "TIMELINE_ENTRIES",
    "JobFilter",
    "SignInView",
    "WorkersView",
    "backfill_job",
    "cancel_run",
    "create_job",
    "fold_requests",
    "job_action",
    "job_of",
    "job_view",
    "jobs_view",
    "labels_text",
    "next_fire_times",
    "overview_view",
    "redrive_run",
    "restore_job",
    "run_action",
    "run_view",
    "schedule_in_words",
    "sign_in_view",
    "sign_in_with_token",
    "update_job",
    "what_if_of",
    "when",
    "workers_view",
    "zone",
]
