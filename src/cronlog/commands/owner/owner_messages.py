"""The messages a partition owner writes besides its events: replies to commands,
dispatches and cancellations for workers, dead letters and alerts."""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from cronlog.commands.owner.alerts import alert
from cronlog.commands.owner.ports import Outgoing, Topics
from cronlog.commands.reply_routes import reply_key
from cronlog.domain.catalogue import JobEvent, OwnerRecord
from cronlog.domain.job import Job
from cronlog.domain.notify_rule import AlertFact
from cronlog.domain.run import Run
from cronlog.ports import Record


def reply(topics: Topics, request_id: str, ok: bool, code: str | None = None,
          message: str | None = None, job_id: UUID | None = None,
          job_version: int | None = None, correlation_id: str | None = None,
          error_field: str | None = None, key: str | None = None,
          repeated: bool = False) -> Outgoing:
    """Keyed by the reply key the correlation id names (commands/reply_routes.py): the
    partition the asking api reads. Without one (an older api, reading every partition), by
    `key`, the command's own inbox key, so the reply goes to the replies partition of the
    same number as the command's inbox partition (one the owner writes its events to anyway):
    an owner of 512 of 1,024 partitions whose replies went to partitions by correlation id
    added hundreds more partitions to each transaction, which then timed out. The api waits
    by correlation id (two tenants may send one request id)."""
    return Outgoing(topics.replies,
                    reply_key(correlation_id) or key or correlation_id or request_id,
                    OwnerRecord.COMMAND_REPLY, {
        "request_id": request_id, "ok": ok, "error_code": code, "error_message": message,
        "job_id": str(job_id) if job_id else None, "job_version": job_version,
        "correlation_id": correlation_id, "error_field": error_field, "repeated": repeated,
    })


def request_applied(topics: Topics, job_id: UUID, job_version: int, request_id: str,
                    command: str, digest: str, at: datetime) -> Outgoing:
    """Takes the request id on the job, in the transaction of the command's events; the
    state projection keeps it so that retries and reuses are judged after any restart."""
    return Outgoing(topics.job_events, str(job_id), JobEvent.REQUEST_APPLIED, {
        "job_id": str(job_id), "version": job_version, "at": at, "request_id": request_id,
        "command": command, "request_digest": digest})


def dispatch(topics: Topics, run: Run, job: Job, dispatched: Record) -> Outgoing:
    # Every attempt runs what the job says when it is dispatched: a run withdrawn by an
    # update goes out again with the new handler, payload and queue.
    run_id, job_id, spec = str(run.id), str(run.job_id), job.spec
    return Outgoing(topics.dispatch(spec.queue), job_id, OwnerRecord.DISPATCH, {
        "run_id": run_id, "job_id": job_id, "attempt": dispatched["attempt"],
        "tenant": run.tenant, "handler": spec.handler, "payload": spec.payload,
        "scheduled_at": run.scheduled_at, "not_before": dispatched["not_before"],
        "timeout_ms": dispatched["timeout_ms"],
        "heartbeat_timeout_ms": int(spec.heartbeat_timeout.total_seconds() * 1000),
        "idempotency_key": run_id,
    })


def cancel_attempt(topics: Topics, queue: str, run: Run, cancelled: Record) -> Outgoing:
    # Same topic and key as the dispatch, so it reaches the worker holding that dispatch
    # after the dispatch itself.
    return Outgoing(topics.dispatch(queue), str(run.job_id), OwnerRecord.CANCEL_ATTEMPT, {
        "run_id": str(run.id), "job_id": str(run.job_id), "attempt": cancelled["attempt"],
        "reason": cancelled["reason"], "at": cancelled["at"]})


def dead_letter(topics: Topics, run: Run, failed: Record, job: Job | None) -> list[Outgoing]:
    """A run out of retries goes to the dead-letter topic, and its tenant is alerted; both
    in the transaction that records RunFailed."""
    key = str(run.job_id)
    return [
        Outgoing(topics.dead_letters, key, OwnerRecord.DEAD_LETTER, {
            "run_id": str(run.id), "job_id": key, "tenant": run.tenant, "queue": run.queue,
            "handler": run.handler, "scheduled_at": run.scheduled_at,
            "attempts": run.attempt, "reason": failed["reason"], "at": failed["at"]}),
        alert(topics, AlertFact.RUN_DEAD_LETTERED, run.tenant, key,
              f"run {run.id} of job {key} failed for good: {failed['reason']}", failed["at"],
              f"{run.id}\x00{run.attempt}", job=job, run_id=run.id, attempt=run.attempt),
    ]


def tenant_limit_alert(topics: Topics, tenant: str, job_id: UUID, share: int,
                       at: datetime) -> Outgoing:
    return alert(topics, AlertFact.TENANT_IN_FLIGHT_LIMIT, tenant, job_id,
                 f"tenant {tenant} reached its in-flight limit ({share} runs on this "
                 "owner's partitions); due fire times wait until runs end", at, at.isoformat())


def unserved_queue_alert(topics: Topics, run: Run, queue: str, start_timeout: timedelta,
                         at: datetime) -> Outgoing:
    return alert(topics, AlertFact.QUEUE_UNSERVED, run.tenant, run.job_id,
                 f"no worker of queue {queue!r} started run {run.id} within "
                 f"{start_timeout} of its time: is any worker serving the queue?", at,
                 f"{run.id}\x00{run.attempt}", run_id=run.id, attempt=run.attempt or None)
