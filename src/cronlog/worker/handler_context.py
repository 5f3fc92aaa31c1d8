"""What a handler is given and may raise: the attempt's context, its failures, and reading a
JSON payload."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from uuid import UUID

from cronlog.domain.bounds import MAX_PROGRESS_BYTES

# Guards the first creation of a context's cancellation event (see HandlerContext.cancelled).
_CANCELLED_CREATION = threading.Lock()


class HandlerContext:
    """What a handler knows of the attempt it runs.

    A plain class with slots: a worker builds one for every dispatch it holds (a minute of
    them before a burst), and a frozen dataclass with its threading.Event took 4.4 µs each.
    """

    __slots__ = (
        "_cancelled",
        "_on_heartbeat",
        "attempt",
        "idempotency_key",
        "job_id",
        "payload",
        "run_id",
        "scheduled_at",
        "timeout_seconds",
    )

    def __init__(self, run_id: UUID, job_id: UUID, attempt: int, idempotency_key: str,
                 payload: bytes, scheduled_at: datetime, timeout_seconds: float) -> None:
        self.run_id = run_id
        self.job_id = job_id
        self.attempt = attempt
        # Stable across every attempt of a run: a handler with side effects dedupes on it.
        self.idempotency_key = idempotency_key
        self.payload = payload
        self.scheduled_at = scheduled_at
        self.timeout_seconds = timeout_seconds
        self._cancelled: threading.Event | None = None
        self._on_heartbeat: Callable[[bytes | None], None] | None = None

    @property
    def cancelled(self) -> threading.Event:
        """Set when the attempt is cancelled or past its timeout; a long handler checks it
        or waits on it. Made on first use: most handlers never look."""
        event = self._cancelled
        if event is None:
            with _CANCELLED_CREATION:
                # The worker's loop (cancelling) and the handler's thread may both be first.
                if self._cancelled is None:
                    self._cancelled = threading.Event()
                event = self._cancelled
        return event

    def heartbeat(self, details: bytes | None = None) -> None:
        """The attempt is alive; details (cut to MAX_PROGRESS_BYTES) are its progress, None
        keeps the last. The worker sends them, rate-limited (worker/running_attempts.py);
        before the attempt starts, or after it ended, a heartbeat goes nowhere."""
        listener = self._on_heartbeat
        if listener is not None:
            listener(None if details is None else details[:MAX_PROGRESS_BYTES])

    def on_heartbeat(self, listener: Callable[[bytes | None], None] | None) -> None:
        """Who hears the handler's heartbeats while the attempt runs (None: nobody)."""
        self._on_heartbeat = listener

    def __repr__(self) -> str:
        return (f"HandlerContext(run_id={self.run_id}, job_id={self.job_id}, "
                f"attempt={self.attempt})")


class HandlerFailed(Exception):
    """A handler reports a failed attempt; the message becomes the attempt's error."""

    def __init__(self, message: str, error_type: str = "HandlerFailed",
                 output: bytes = b"") -> None:
        super().__init__(message)
        self.error_type = error_type
        self.output = output


class UnknownHandler(LookupError):
    """No handler is registered under the name a dispatch asks for."""


Handler = Callable[[HandlerContext], bytes]


class PayloadError(HandlerFailed):
    def __init__(self, handler: str, message: str) -> None:
        super().__init__(f"{handler}: bad payload: {message}", "PayloadError")


def json_payload(handler: str, payload: bytes) -> dict[str, object]:
    try:
        value = json.loads(payload.decode() or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(handler, f"not JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise PayloadError(handler, "expected a JSON object")
    return value
