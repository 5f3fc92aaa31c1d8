"""Handlers a worker can run, looked up by the name a job gives in its spec."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

if TYPE_CHECKING:
    from cronlog.worker.outbound import OutboundPolicy

# Guards the first creation of a context's cancellation event (see HandlerContext.cancelled).
_CANCELLED_CREATION = threading.Lock()


class HandlerContext:
    """What a handler knows of the attempt it runs.

    A plain class with slots: a worker builds one for every dispatch it holds (a minute of
    them before a burst), and a frozen dataclass with its threading.Event took 4.4 µs each.
    """

    __slots__ = (
        "_cancelled",
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


def echo(ctx: HandlerContext) -> bytes:
    return ctx.payload


def sleep(ctx: HandlerContext) -> bytes:
    args = json_payload("sleep", ctx.payload)
    seconds = args.get("seconds", 1)
    if not isinstance(seconds, int | float) or seconds < 0:
        raise PayloadError("sleep", "'seconds' must be a non-negative number")
    if ctx.cancelled.wait(float(seconds)):
        raise HandlerFailed("cancelled while sleeping", "Cancelled")
    return json.dumps({"slept": seconds}).encode()


def fail(ctx: HandlerContext) -> bytes:
    args = json_payload("fail", ctx.payload)
    times = args.get("times", 1)
    if not isinstance(times, int) or times < 0:
        raise PayloadError("fail", "'times' must be a non-negative integer")
    if ctx.attempt <= times:
        raise HandlerFailed(f"failing on purpose: attempt {ctx.attempt} of the first {times}",
                            "DeliberateFailure")
    return json.dumps({"succeeded_on_attempt": ctx.attempt}).encode()


def http(ctx: HandlerContext) -> bytes:
    """POSTs `body` to `url` (payload JSON), with the idempotency key in a header, under the
    default outbound policy (public addresses only). Workers use the policy of their
    configuration instead: see HandlerRegistry."""
    from cronlog.worker.http_handler import HttpHandler
    from cronlog.worker.outbound import OutboundPolicy

    return HttpHandler(OutboundPolicy())(ctx)


BUILT_IN_HANDLERS: Mapping[str, Handler] = {"echo": echo, "sleep": sleep, "fail": fail,
                                             "http": http}


class HandlerRegistry:
    """Names to handlers; custom Python handlers register here next to the built-in ones."""

    def __init__(self, handlers: Mapping[str, Handler] | None = None,
                 outbound: OutboundPolicy | None = None) -> None:
        """outbound: where the built-in `http` handler may send requests (its default admits
        public addresses only)."""
        self._handlers: dict[str, Handler] = dict(BUILT_IN_HANDLERS if handlers is None
                                                  else handlers)
        if outbound is not None:
            # Imported here: the http handler builds on this module's context and errors.
            from cronlog.worker.http_handler import HttpHandler

            self._handlers["http"] = HttpHandler(outbound)

    def register(self, name: str, handler: Handler) -> None:
        if not name:
            raise ValueError("a handler needs a name")
        self._handlers[name] = handler

    def get(self, name: str) -> Handler:
        try:
            return self._handlers[name]
        except KeyError:
            raise UnknownHandler(f"no handler named {name!r} on this worker") from None

    def __contains__(self, name: object) -> bool:
        return name in self._handlers

    def names(self) -> list[str]:
        return sorted(self._handlers)
