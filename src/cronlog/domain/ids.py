"""Deterministic ids: retries of a request, and re-fires of a fire time, get the same id."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from hashlib import sha1
from uuid import UUID

from cronlog.domain.errors import InvalidSpec

# Fixed namespaces: changing one would change every id cronlog has ever handed out.
JOB_NAMESPACE = UUID("6f1c7f52-3f2e-4c55-9d7b-0c8f0e6a9b11")
MANUAL_RUN_NAMESPACE = UUID("0b7d5b86-5a0e-4f0b-8f51-5a3c1c1f7e22")


# RFC 4122's version 5: the top two bits of clock_seq are 10, the version nibble is 5.
_NOT_VERSION_BITS = ~(0xC000 << 48) & ~(0xF000 << 64)
_VERSION_5_BITS = (0x8000 << 48) | (5 << 76)


def uuid5(namespace: UUID, name: str) -> UUID:
    """The same UUID as the standard library's uuid5, at less than half its cost: it
    builds the result from its integer with the version bits set here, where the library
    passes bytes and a version through UUID's general constructor. Every run id and every
    created job's id is one (a few per cent of an owner's CPU per run)."""
    digest = sha1(namespace.bytes + name.encode()).digest()
    return UUID(int=(int.from_bytes(digest[:16]) & _NOT_VERSION_BITS) | _VERSION_5_BITS)


def as_uuid(value: object) -> UUID:
    """A UUID from a record field, which holds a UUID or its text depending on its source."""
    return value if isinstance(value, UUID) else UUID(str(value))


def job_id_for_request(tenant: str, request_id: str) -> UUID:
    """A CreateJob retried with the same request id maps to the same job and partition."""
    return uuid5(JOB_NAMESPACE, f"{tenant}\x00{request_id}")


# The text of recent fire times: the jobs of one owner that fire at one instant share it,
# and formatting it was a fifth of a run id. Emptied when full; a miss only costs the format.
_INSTANT_TEXT: dict[datetime, str] = {}
_REMEMBERED_INSTANTS = 4096


def run_id_for(job_id: UUID, scheduled_at: datetime) -> UUID:
    """Invariant 4: the idempotency key of the run of one fire time of one job."""
    instant = scheduled_at.astimezone(UTC)
    # Keyed in UTC: two local times of one zone compare by wall time, fold ignored.
    text = _INSTANT_TEXT.get(instant)
    if text is None:
        text = instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if len(_INSTANT_TEXT) >= _REMEMBERED_INSTANTS:
            _INSTANT_TEXT.clear()
        _INSTANT_TEXT[instant] = text
    return uuid5(job_id, text)


def manual_run_id(job_id: UUID, request_id: str) -> UUID:
    return uuid5(MANUAL_RUN_NAMESPACE, f"{job_id}\x00{request_id}")


BACKFILL_RUN_NAMESPACE = UUID("3c9e2a41-7d6b-4e1f-a5c8-2b9d4f6e8a33")


def backfill_run_id(job_id: UUID, request_id: str, scheduled_at: datetime) -> UUID:
    """A backfill re-runs fire times that may have run already: its runs need their own
    ids, the same again when the backfill request is retried."""
    instant = scheduled_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return uuid5(BACKFILL_RUN_NAMESPACE, f"{job_id}\x00{request_id}\x00{instant}")


MAX_REQUEST_ID_CHARS = 200
# Printable characters only: a request id is stored as Postgres text (which refuses NUL) and
# shown in replies, logs and the audit timeline.
_REQUEST_ID = re.compile("[\x20-\x7e\u00a0-\ud7ff\ue000-\uffff\U00010000-\U0010ffff]"
                         f"{{1,{MAX_REQUEST_ID_CHARS}}}")


def valid_request_id(request_id: object) -> bool:
    return isinstance(request_id, str) and _REQUEST_ID.fullmatch(request_id) is not None


def require_request_id(request_id: object) -> str:
    """The request id if it is 1 to 200 printable characters; InvalidSpec otherwise."""
    if not isinstance(request_id, str) or not valid_request_id(request_id):
        raise InvalidSpec("request_id", f"a request id of 1 to {MAX_REQUEST_ID_CHARS} "
                                        "printable characters is required")
    return request_id
