"""Request ids: what a command's request id means to the owner, and how a reuse is judged.

A request id is taken per job (the job belongs to one tenant, and the api scopes every
command to the caller's tenant), by one command with one body. The owner answers a retry
(same job, same id, same command and body) with the first outcome, and refuses the same id
with any other request on that job: a client that reuses an id by mistake learns so instead
of getting an OK for something that was never applied.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID

from cronlog.commands import messages
from cronlog.commands.owner.ports import StoredRequest
from cronlog.domain.errors import DomainError

# The fields of each command that say what it does, from the command's class
# (commands/messages.py): not `at` (when the api sent it), not the correlation id (one per
# send), not the job id (the key already names the job), not the request id itself.
MEANINGFUL_FIELDS = messages.MEANINGFUL_FIELDS

REUSED_CODE = "INVALID_ARGUMENT"


# Values JSON takes as they are: most of a command's fields. Matched by exact type, so
# subclasses (a StrEnum, an OrderedDict) take the general path below, as before.
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def _canonical(value: Any) -> Any:
    """A JSON value that is the same for equal field values however they were decoded.

    The common types first by exact type (a CreateJob's spec is a few dozen of them, and
    every command's digest is taken on the owner's hot path); the same answers as
    _canonical_any, which the tests check."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if kind is list or kind is tuple:
        return [_canonical(v) for v in value]
    return _canonical_any(value)


def _canonical_any(value: Any) -> Any:
    if isinstance(value, Mapping):
        # An optional field that is null is left out, so a schema version that adds one
        # (as JobSpec's start_timeout_ms) does not change the digest of a retried request.
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, datetime):
        # Instants, not their zone: the same instant read back from Avro is in UTC.
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
        return {"us": delta // _MICROSECOND}
    if isinstance(value, date):
        return {"day": value.isoformat()}  # excluded days (issue 20)
    if isinstance(value, bytes | bytearray | memoryview):
        return {"hex": bytes(value).hex()}
    if isinstance(value, UUID):
        return str(value)
    return value


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)
# json.dumps with these arguments builds an encoder per call, which cost more than the
# encoding of a CreateJob's body; one encoder, which keeps no state between calls, writes
# the same text.
_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def request_digest(command: str, record: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the command's name and its meaningful fields."""
    fields = MEANINGFUL_FIELDS.get(command, ())
    body = {"command": command, **{f: _canonical(record.get(f)) for f in fields}}
    text = _JSON.encode(body)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Request:
    """One command as the owner decides it: which job and id, and what it asks."""

    job_id: UUID
    request_id: str
    command: str
    digest: str
    # Where the api waits for the reply; None from senders older than correlation ids.
    correlation_id: str | None

    @property
    def key(self) -> tuple[UUID, str]:
        return (self.job_id, self.request_id)

    @classmethod
    def of(cls, command: messages.CommandMessage) -> Request:
        """The request a command makes of its job (or calendar)."""
        correlation = command.correlation_id
        return cls(job_id=command.subject, request_id=command.request_id,
                   command=command.NAME, digest=request_digest(command.NAME,
                                                               command.meaningful()),
                   correlation_id=str(correlation) if correlation else None)


@dataclass(frozen=True)
class Outcome:
    """What a command was answered; a retry of the same request gets it again."""

    ok: bool
    code: str | None = None
    message: str | None = None
    job_id: UUID | None = None
    job_version: int | None = None
    field: str | None = None
    # The request id had been answered already: this repeats the first outcome (a retry),
    # and the command changed nothing. Said in the reply: the api cannot tell from its
    # Postgres read, which the owner's apply may not have reached yet.
    repeated: bool = False

    @classmethod
    def refused(cls, exc: DomainError, field: str | None = None) -> Outcome:
        """The answer to a command the domain refused: the error's own status and field."""
        return cls(ok=False, code=exc.status, message=str(exc), field=field or exc.field)


@dataclass(frozen=True)
class Answered:
    """A request this cycle has decided, with its outcome."""

    request: Request
    outcome: Outcome


def reused(request: Request, earlier_command: str | None) -> Outcome:
    """The refusal of a request id already taken on the job by another request."""
    what = f"{earlier_command}" if earlier_command else "another request"
    return Outcome(ok=False, code=REUSED_CODE, field="request_id", message=(
        f"request_id {request.request_id!r} was already used on job {request.job_id} for "
        f"{what} with a different body; a retry must repeat the same request, anything "
        "else needs a new request_id"))


def earlier_outcome(request: Request, answered: Answered | None,
                    stored: StoredRequest | None) -> Outcome | None:
    """The answer to a request whose id the job has seen, this cycle or before; None when the
    id is new on the job and the request must be decided."""
    if answered is not None:
        if answered.request.digest == request.digest:
            return answered.outcome
        return reused(request, answered.request.command)
    if stored is None:
        return None
    if stored.digest is None:
        # Taken before digests were kept (a job event's request id, from an older log): only
        # the command may be known, so a matching one counts as the retry it most likely is.
        if stored.command is not None and stored.command != request.command:
            return reused(request, stored.command)
    elif stored.digest != request.digest:
        return reused(request, stored.command)
    return Outcome(ok=True, job_id=request.job_id, job_version=stored.job_version)
