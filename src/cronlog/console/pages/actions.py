"""What the console's forms and buttons do: pause, resume, trigger, delete, cancel, create,
edit, backfill and restore a job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronlog.console.pages.common import own
from cronlog.console.ports import (
    ApiRefused,
    Credentials,
    JobChange,
    JobsApi,
    JobSummary,
    NewJob,
    RunSummary,
    WhatIfSummary,
)

ACTIONS = ("pause", "resume", "trigger", "delete")


# The interval the backfill form offers first: the last hour.
BACKFILL_DEFAULT = timedelta(hours=1)


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
        if self.action == "restore" and self.job is not None:
            return (f"restored: job {self.job.job_id} is {self.job.status} at version "
                    f"{self.job.version}")
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
        own(who, api.get_job(who, job_id).tenant, "job", job_id)
    if action == "trigger":
        return ActionDone(action, request_id, None, api.trigger_job(who, request_id, job_id))
    act = {"pause": api.pause_job, "resume": api.resume_job, "delete": api.delete_job}[action]
    return ActionDone(action, request_id, act(who, request_id, job_id), None)


def cancel_run(api: JobsApi, who: Credentials, run_id: str, request_id: str) -> ActionDone:
    if who.token is None:
        own(who, api.get_run(who, run_id).tenant, "run", run_id)
    return ActionDone("cancel", request_id, None, api.cancel_run(who, request_id, run_id))


def redrive_run(api: JobsApi, who: Credentials, run_id: str, request_id: str) -> ActionDone:
    """A dead letter's new series of attempts (docs/lifecycle.md, "Re-driving a dead letter")."""
    if who.token is None:
        own(who, api.get_run(who, run_id).tenant, "run", run_id)
    return ActionDone("redrive", request_id, None, api.redrive_run(who, request_id, run_id))


RUN_ACTIONS = {"cancel": cancel_run, "redrive": redrive_run}


def run_action(api: JobsApi, who: Credentials, action: str, run_id: str,
               request_id: str) -> ActionDone:
    """A button of the run's page: cancel a run not ended, re-drive a dead letter."""
    act = RUN_ACTIONS.get(action)
    if act is None:
        raise ApiRefused("INVALID_ARGUMENT", f"unknown action {action[:40]!r}", "action")
    return act(api, who, run_id, request_id)


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
    version the form was filled at, so a change made meanwhile is refused, not lost."""
    shown = form.get("version", "")
    if not shown.isdigit() or int(shown) < 1 or len(shown) > 19:
        raise ApiRefused("INVALID_ARGUMENT", "the form does not say which version of the job "
                         "it was filled at: open the update form again", "version")
    if who.token is None:
        own(who, api.get_job(who, job_id).tenant, "job", job_id)
    return ActionDone("update", request_id,
                      api.update_job(who, request_id, job_id, int(shown), _change_of(form)),
                      None)


def _change_of(form: Mapping[str, str]) -> JobChange:
    cron = form.get("cron")
    return JobChange(name=form.get("name", "").strip(), handler=form.get("handler", "").strip(),
                     queue=form.get("queue", "").strip() or "default",
                     cron=cron.strip() if cron is not None else None,
                     time_zone=form.get("time_zone", "").strip(),
                     payload=form.get("payload", "").encode(),
                     labels=_labels(form.get("labels", "")))


# The update form's preview replays this much of the job's real history.
WHAT_IF_HISTORY = timedelta(days=7)


def what_if_of(api: JobsApi, who: Credentials, job_id: str, form: Mapping[str, str],
               now: datetime) -> WhatIfSummary:
    """The update form's change replayed over the job's last WHAT_IF_HISTORY (WhatIf):
    shown before the update is confirmed."""
    if who.token is None:
        own(who, api.get_job(who, job_id).tenant, "job", job_id)
    return api.what_if(who, job_id, _change_of(form), now - WHAT_IF_HISTORY, now)


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
        own(who, api.get_job(who, job_id).tenant, "job", job_id)
    return ActionDone("backfill", request_id, None, None,
                      tuple(api.backfill_job(who, request_id, job_id, start, end)))


def restore_job(api: JobsApi, who: Credentials, job_id: str, form: Mapping[str, str],
                request_id: str) -> ActionDone:
    """The restore form: the version whose spec the job gets back, and whether a deleted
    job's fire times since the delete are skipped (docs/lifecycle.md, "Restoring a job")."""
    shown = form.get("version", "").strip()
    if not shown.isdigit() or int(shown) < 1 or len(shown) > 19:
        raise ApiRefused("INVALID_ARGUMENT", f"{shown[:40]!r} is not a version: a whole "
                         "number from 1 to the job's version", "version")
    if who.token is None:
        own(who, api.get_job(who, job_id).tenant, "job", job_id)
    skip = form.get("skip_missed") == "on"
    return ActionDone("restore", request_id,
                      api.restore_job(who, request_id, job_id, int(shown), skip), None)
