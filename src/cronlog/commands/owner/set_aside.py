"""What an owner does with what it cannot decide: one bad message fails only itself.

DESIGN invariant 9: whatever one command, report or job holds, deciding it can fail only
that message (or that job). The owner decides a cycle again without the culprit; the
culprit goes to the poison topic with its error, its tenant is alerted, and a command's
caller is told. Nothing is retried forever: the culprit's inbox offset is committed with
the cycle like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from cronlog.commands.owner import owner_messages
from cronlog.commands.owner.alerts import alert
from cronlog.commands.owner.ports import EpochLost, Outgoing, Topics, TransactionRejected
from cronlog.domain.catalogue import OwnerRecord
from cronlog.domain.ids import MAX_REQUEST_ID_CHARS, as_uuid
from cronlog.domain.job import Job
from cronlog.domain.notify_rule import AlertFact
from cronlog.log_fields import log_fields
from cronlog.ports import UNREADABLE, InboundMessage, LogUnavailable, StoreUnavailable

log = logging.getLogger(__name__)

# An error text is kept to this many characters in the poison record, the alert and the
# reply: its message may repeat input of any size.
MAX_ERROR_CHARS = 1000


class MessageFailed(Exception):
    """Deciding inbox message number `index` of the cycle raised."""

    def __init__(self, index: int, cause: BaseException) -> None:
        super().__init__(f"message {index}: {describe(cause)}")
        self.index = index
        self.cause = cause


class JobFailed(Exception):
    """Firing, expiring, releasing or encoding something of one job raised: a message of
    this cycle on that job may have caused it, or the job itself can no longer be decided."""

    def __init__(self, job_id: UUID, tenant: str | None, cause: BaseException) -> None:
        super().__init__(f"job {job_id}: {describe(cause)}")
        self.job_id = job_id
        self.tenant = tenant
        self.cause = cause


# Failures of the outside world: the cycle is dropped and state re-read, never blamed on the
# message or job being decided when they happened.
OUTSIDE_FAILURES = (StoreUnavailable, LogUnavailable, EpochLost, TransactionRejected)


@contextmanager
def blaming(job_id: UUID, tenant: str | None) -> Iterator[None]:
    """Whatever deciding something of the job raises (but the outside world's failures) is
    that job's: JobFailed, which the cycle answers without failing the others."""
    try:
        yield
    except OUTSIDE_FAILURES:
        raise
    except Exception as exc:
        raise JobFailed(job_id, tenant, exc) from exc


class JobsSetAside:
    """Jobs this owner could not fire or track (JobFailed): skipped until a command changes
    them or partitions change hands; their alerts go out with the next committed cycle."""

    def __init__(self) -> None:
        self._jobs: set[UUID] = set()
        self._alerts: list[Outgoing] = []

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __iter__(self) -> Iterator[UUID]:
        return iter(set(self._jobs))

    def add(self, job_id: UUID, alert: Outgoing) -> None:
        self._jobs.add(job_id)
        self._alerts.append(alert)

    def discard(self, job_id: UUID) -> None:
        self._jobs.discard(job_id)

    def clear(self) -> None:
        self._jobs.clear()

    @property
    def alerts(self) -> list[Outgoing]:
        """Alerts not committed yet."""
        return list(self._alerts)

    def alerts_sent(self) -> None:
        self._alerts.clear()


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "…"


def job_of(message: InboundMessage) -> UUID | None:
    """The job a message names, if it names a readable one."""
    try:
        value = message.record.get("job_id")
        return None if value is None else value if isinstance(value, UUID) else UUID(str(value))
    except (AttributeError, TypeError, ValueError):
        return None


def correlation_of(message: InboundMessage) -> str | None:
    """The correlation id the api put on a command, for its reply to find the way back."""
    value = message.record.get("correlation_id")
    return str(value)[:200] if value is not None else None


def unreadable_error(message: InboundMessage) -> str | None:
    """Why a message could not even be read, or None for a readable one."""
    if message.name != UNREADABLE:
        return None
    return str(message.record.get("error") or "unreadable")[:MAX_ERROR_CHARS]


@dataclass
class Suspects:
    """The messages of one failing job held back while the owner finds which of them made
    it fail: the cycle is decided without them, then with them again one at a time."""

    job_id: UUID
    waiting: list[int]
    readmitted: int | None = None


@dataclass
class SetAside:
    """The culprits of one cycle, by message index, with their errors."""

    errors: dict[int, str] = field(default_factory=dict)
    suspects: Suspects | None = None

    def excluded(self) -> set[int]:
        held = set(self.suspects.waiting) if self.suspects is not None else set()
        return set(self.errors) | held

    def blame(self, failed: JobFailed, messages: Sequence[InboundMessage]) -> bool:
        """Takes the next step of finding which message made `failed.job_id` fail; False
        when no message of this cycle can have: the job itself is at fault."""
        suspects = self.suspects
        if suspects is not None and suspects.job_id == failed.job_id \
                and suspects.readmitted is not None:
            self.errors[suspects.readmitted] = describe(failed.cause)
            suspects.readmitted = None
            return True
        excluded = self.excluded()
        mine = [i for i, m in enumerate(messages)
                if i not in excluded and job_of(m) == failed.job_id]
        if not mine:
            return False
        if suspects is None:
            self.suspects = Suspects(failed.job_id, mine)
        else:
            # Already looking for another job's culprit: blame this job's latest message
            # rather than nest a second search.
            self.errors[mine[-1]] = describe(failed.cause)
        return True

    def readmit_next(self) -> bool:
        """After a cycle decided cleanly: lets the next held-back message in again; False
        when none is left and the cycle stands."""
        suspects = self.suspects
        if suspects is None:
            return False
        if not suspects.waiting:
            self.suspects = None
            return False
        suspects.readmitted = suspects.waiting.pop(0)
        return True


def poison_records(topics: Topics, message: InboundMessage, error: str, tenant: str | None,
                   at: datetime) -> list[Outgoing]:
    """The poison record of a set-aside message and, when it names a job, its tenant's
    alert (the reply to a command is the owner's: it knows the reply's shape)."""
    job_id = job_of(message)
    key = str(job_id) if job_id is not None else f"partition-{message.partition}"
    log.error("set aside %s at %s[%d]@%d: %s", message.name, message.topic,
              message.partition, message.offset, error, extra=log_fields(tenant, job_id))
    out = [Outgoing(topics.poison, key, OwnerRecord.POISON_MESSAGE, {
        "source_topic": message.topic, "partition": message.partition,
        "offset": message.offset, "message_name": message.name,
        "job_id": str(job_id) if job_id is not None else None, "tenant": tenant,
        "error": error, "body": message.raw, "at": at})]
    if job_id is not None:
        out.append(alert(topics, AlertFact.MESSAGE_SET_ASIDE, tenant or "unknown", job_id,
                         f"{message.name} for job {job_id} could not be decided and was set "
                         f"aside on {topics.poison}: {error}", at,
                         f"{message.topic}\x00{message.partition}\x00{message.offset}"))
    return out


def job_set_aside_alert(topics: Topics, failed: JobFailed, at: datetime) -> Outgoing:
    log.error("job %s set aside: %s", failed.job_id, describe(failed.cause),
              extra=log_fields(failed.tenant, failed.job_id))
    return alert(topics, AlertFact.JOB_SET_ASIDE, failed.tenant or "unknown", failed.job_id,
                 f"job {failed.job_id} cannot be fired or tracked and was set aside by this "
                 f"scheduler until a command changes it: {describe(failed.cause)}", at,
                 at.isoformat())


def set_aside_records(topics: Topics, job_of_id: Callable[[UUID], Job | None],
                      messages: Sequence[InboundMessage], errors: dict[int, str],
                      at: datetime) -> list[Outgoing]:
    """For each message set aside: its poison record and alert, and, when it asked for a
    reply, the answer that it was set aside."""
    out: list[Outgoing] = []
    for index, error in sorted(errors.items()):
        message = messages[index]
        out.extend(poison_records(topics, message, error, _tenant_named_by(message, job_of_id),
                                  at))
        request_id = message.record.get("request_id")
        if request_id:
            out.append(owner_messages.reply(
                topics, str(request_id)[:MAX_REQUEST_ID_CHARS], False, "INTERNAL",
                f"the scheduler could not apply {message.name} and set it aside (operators "
                f"see it on the poison topic): {error}", None, None, correlation_of(message),
                None))
    return out


def _tenant_named_by(message: InboundMessage,
                     job_of_id: Callable[[UUID], Job | None]) -> str | None:
    spec = message.record.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("tenant"), str):
        return str(spec["tenant"])[:64]
    try:
        job = job_of_id(as_uuid(message.record["job_id"]))
    except OUTSIDE_FAILURES:
        raise
    except Exception:  # a message naming no readable job has no tenant
        return None
    return job.spec.tenant if job is not None else None
