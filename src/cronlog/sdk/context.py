"""What a handler is given: its run, its payload, its deadline and cancellation, a logger."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from cronlog.sdk.handlers import NonRetryable
from cronlog.sdk.values import as_bytes


class Attempt(Protocol):
    """The attempt as the worker holds it (worker/handler_context.py)."""

    run_id: UUID
    job_id: UUID
    attempt: int
    idempotency_key: str
    payload: bytes
    scheduled_at: datetime

    @property
    def cancelled(self) -> threading.Event: ...

    def heartbeat(self, details: bytes | None = None) -> None: ...


class Context:
    """One attempt of a run, as its handler sees it.

    `idempotency_key` is the same for every attempt of a run (it is the run id): a handler
    with side effects dedupes on it. `cancelled` is set when the run is cancelled or the
    attempt reaches its timeout (`deadline`); a long handler checks it or waits on it, and
    returns or raises soon after: the worker stops it by force after a grace period.
    """

    __slots__ = ("_attempt", "deadline", "handler", "logger")

    def __init__(self, handler: str, attempt: Attempt, deadline: datetime) -> None:
        self.handler = handler
        self._attempt = attempt
        self.deadline = deadline
        # Its lines carry the run's fields (JSON logs write them: docs/operations.md).
        self.logger: logging.LoggerAdapter[logging.Logger] = logging.LoggerAdapter(
            logging.getLogger(f"cronlog.handler.{handler}"),
            {"job_id": str(attempt.job_id), "run_id": str(attempt.run_id),
             "attempt": attempt.attempt})

    @property
    def run_id(self) -> UUID:
        return self._attempt.run_id

    @property
    def job_id(self) -> UUID:
        return self._attempt.job_id

    @property
    def attempt(self) -> int:
        """1 for the run's first attempt."""
        return self._attempt.attempt

    @property
    def idempotency_key(self) -> str:
        return self._attempt.idempotency_key

    @property
    def payload(self) -> bytes:
        return self._attempt.payload

    @property
    def scheduled_at(self) -> datetime:
        """The run's fire time (a manual run's: when it was asked for)."""
        return self._attempt.scheduled_at

    @property
    def cancelled(self) -> threading.Event:
        return self._attempt.cancelled

    def heartbeat(self, details: object = None) -> None:
        """Tells cronlog the attempt is alive and, with details, how far it got.

        Details are bytes, text or anything JSON can hold, at most MAX_DETAILS_BYTES (1 KiB)
        once encoded: longer ones are cut. They are the attempt's last progress (GetRun, the
        CLI, the console); None keeps the last details. Cheap and safe to call often: the
        worker sends at most one heartbeat a second per attempt, with the latest details.

        From its first heartbeat the attempt's liveness is the handler's: the worker stops
        heartbeating for it, and the scheduler finds it lost (and retries it) when no
        heartbeat arrives within the job's `heartbeat_timeout` (docs/handlers.md).
        A value JSON cannot hold raises TypeError or ValueError.
        """
        self._attempt.heartbeat(None if details is None else as_bytes(details))

    def json(self) -> Any:
        """The payload as JSON (empty: None). A payload that is not JSON will not become
        JSON on a retry: NonRetryable."""
        if not self.payload:
            return None
        try:
            return json.loads(self.payload)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise NonRetryable(f"the payload is not JSON: {exc}") from exc

    def __repr__(self) -> str:
        return f"Context(handler={self.handler!r}, run_id={self.run_id}, attempt={self.attempt})"
