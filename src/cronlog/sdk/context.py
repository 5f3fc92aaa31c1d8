"""What a handler is given: its run, its payload, its deadline and cancellation, a logger."""

from __future__ import annotations

import json
import logging
import threading
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.sdk.handlers import NonRetryable


class Context:
    """One attempt of a run, as its handler sees it.

    `idempotency_key` is the same for every attempt of a run (it is the run id): a handler
    with side effects dedupes on it. `cancelled` is set when the run is cancelled or the
    attempt reaches its timeout (`deadline`); a long handler checks it or waits on it, and
    returns or raises soon after: the worker stops it by force after a grace period.
    """

    __slots__ = ("attempt", "cancelled", "deadline", "handler", "idempotency_key", "job_id",
                 "logger", "payload", "run_id", "scheduled_at")

    def __init__(self, handler: str, run_id: UUID, job_id: UUID, attempt: int,
                 idempotency_key: str, payload: bytes, scheduled_at: datetime,
                 deadline: datetime, cancelled: threading.Event) -> None:
        self.handler = handler
        self.run_id = run_id
        self.job_id = job_id
        self.attempt = attempt
        self.idempotency_key = idempotency_key
        self.payload = payload
        self.scheduled_at = scheduled_at
        self.deadline = deadline
        self.cancelled = cancelled
        # Its lines carry the run's fields (JSON logs write them: docs/operations.md).
        self.logger: logging.LoggerAdapter[logging.Logger] = logging.LoggerAdapter(
            logging.getLogger(f"cronlog.handler.{handler}"),
            {"job_id": str(job_id), "run_id": str(run_id), "attempt": attempt})

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
