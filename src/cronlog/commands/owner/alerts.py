"""The alerts an owner writes to `<prefix>alerts`, in the transaction that records what they
are about (docs/alerts.md): the notifier delivers them.

Each carries the job's name and its notify rule as they were, so the notifier needs no
lookup, and an id derived from what it is about (the run and attempt, or the job and the
fire time), so that a cycle decided again after a failed commit raises the same alert under
the same id and a receiver sees one alert, not two.

Which facts are written:

- always: a run dead-lettered (the tenant's default channels get it when the job has no
  rule), a job or message set aside, the tenant-level ones (in-flight limit, an unserved
  queue);
- only for a job whose rule wants them (SERVES): an attempt failed or timed out, a run's
  first attempt started later than the rule's `late_after` after its time, fire times
  missed, and a run succeeded (for `recovered`: the notifier tells a recovery from any
  success). A job without a rule costs nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from cronlog.commands.owner.ports import Outgoing, Topics
from cronlog.domain.catalogue import JobEvent, OwnerRecord, RunEvent
from cronlog.domain.job import Job
from cronlog.domain.notify_rule import SERVES, AlertFact, AlertKind, NotifyRule
from cronlog.domain.run import Run

ALERT_NAMESPACE = UUID("5b0f3c52-7d1e-4e8a-9c46-2f7a1d9e0b83")

# The run events that may raise a job-level alert its rule asks for, and the fact each is.
RUN_FACTS: Mapping[str, AlertFact] = {
    RunEvent.ATTEMPT_FAILED: AlertFact.ATTEMPT_FAILED,
    RunEvent.ATTEMPT_TIMED_OUT: AlertFact.ATTEMPT_TIMED_OUT,
    RunEvent.ATTEMPT_STARTED: AlertFact.RUN_STARTED_LATE,
    # A run ends succeeded with its attempt's success (RunSucceeded is only in old logs).
    RunEvent.ATTEMPT_SUCCEEDED: AlertFact.RUN_SUCCEEDED,
    RunEvent.MISSED: AlertFact.FIRE_TIMES_MISSED,
}


def alert_id(fact: AlertFact, job_id: UUID | str, about: str) -> UUID:
    """The same fact about the same thing is the same alert, however often decided."""
    return uuid5(ALERT_NAMESPACE, f"{fact.value}\x00{job_id}\x00{about}")


def alert(topics: Topics, fact: AlertFact, tenant: str, job_id: UUID | str, message: str,
          at: datetime, about: str, *, job: Job | None = None, run_id: UUID | None = None,
          attempt: int | None = None) -> Outgoing:
    """One Alert record, keyed by its job. `about` tells this alert from the job's others of
    the fact (a run and attempt, a fire time, a message's offset)."""
    rule = job.spec.notify if job is not None else None
    return Outgoing(topics.alerts, str(job_id), OwnerRecord.ALERT, {
        "alert_id": alert_id(fact, job_id, about), "tenant": tenant, "kind": fact.value,
        "job_id": str(job_id), "job_name": job.spec.name if job is not None else "",
        "run_id": None if run_id is None else str(run_id), "attempt": attempt,
        "message": message, "at": at,
        "notify": None if rule is None else rule_record(rule)})


def rule_record(rule: NotifyRule) -> dict[str, Any]:
    return {"channels": list(rule.channels),
            "on": [kind.value for kind in AlertKind if kind in rule.on]}


def run_event_alerts(topics: Topics, run: Run, name: str, record: Mapping[str, Any],
                     job: Job | None) -> list[Outgoing]:
    """The alerts a run event raises for a job whose rule wants them: an AttemptSucceeded
    that stands for its attempt's start too (it has started_at) is both facts."""
    raised = [run_event_alert(topics, run, name, record, job)]
    if name == RunEvent.ATTEMPT_SUCCEEDED and record.get("started_at") is not None:
        raised.insert(0, run_event_alert(topics, run, RunEvent.ATTEMPT_STARTED, record, job))
    return [alert for alert in raised if alert is not None]


def run_event_alert(topics: Topics, run: Run, name: str, record: Mapping[str, Any],
                    job: Job | None) -> Outgoing | None:
    """The alert a run event raises for a job whose rule wants it, if any."""
    fact = RUN_FACTS.get(name)
    rule = job.spec.notify if job is not None else None
    if fact is None or rule is None or not rule.wants(SERVES[fact]):
        return None
    attempt = record.get("attempt")
    at = record["at"]
    name_of = f"job {job.spec.name!r}" if job is not None else f"job {run.job_id}"
    if fact is AlertFact.RUN_STARTED_LATE:
        late = record["started_at"] - run.not_before
        # The first attempt of a series only: retries start late by their backoff's design.
        if attempt != run.attempt_base + 1 or late <= rule.late_after:
            return None
        message = (f"run {run.id} of {name_of} started {late.total_seconds():.1f}s after its "
                   f"time (late after {rule.late_after.total_seconds():.0f}s)")
    elif fact is AlertFact.ATTEMPT_FAILED:
        message = f"attempt {attempt} of run {run.id} of {name_of} failed: {record['error']}"
    elif fact is AlertFact.ATTEMPT_TIMED_OUT:
        message = f"attempt {attempt} of run {run.id} of {name_of} timed out"
    elif fact is AlertFact.RUN_SUCCEEDED:
        message = f"run {run.id} of {name_of} succeeded"
    else:
        message = (f"the fire time {run.scheduled_at.isoformat()} of {name_of} was missed: "
                   f"{record.get('reason', '')}")
    return alert(topics, fact, run.tenant, run.job_id, message, at,
                 f"{run.id}\x00{attempt or ''}", job=job, run_id=run.id,
                 attempt=attempt if isinstance(attempt, int) and attempt >= 1 else None)


def job_event_alert(topics: Topics, job: Job, name: str,
                    record: Mapping[str, Any]) -> Outgoing | None:
    """Fire times missed as a range (a pause, an outage), for a job whose rule wants them."""
    rule = job.spec.notify
    if name != JobEvent.FIRE_TIMES_MISSED or rule is None \
            or not rule.wants(AlertKind.MISSED):
        return None
    first, last, count = record["first"], record["last"], record["count"]
    return alert(topics, AlertFact.FIRE_TIMES_MISSED, job.spec.tenant, job.id,
                 f"{count} fire times of job {job.spec.name!r} were missed, "
                 f"{first.isoformat()} to {last.isoformat()}: {record.get('reason', '')}",
                 record["at"], f"{first.isoformat()}\x00{last.isoformat()}", job=job)
