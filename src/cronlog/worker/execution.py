"""Running one attempt's handler: what it is given, how its outcome is bounded and told."""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronlog.domain.ids import as_uuid
from cronlog.worker.attempt_stop import AttemptStopped
from cronlog.worker.handler_context import HandlerContext, HandlerFailed
from cronlog.worker.handlers import HandlerRegistry

# A finished report carries its output and error. Both bounds keep a report (at most about
# 64 KiB + 32 KiB of UTF-8) far below what a WorkerReports message may hold (512 KiB, in
# infra/kafka/report_batches.py), so reports are only ever batched by size, never refused
# one by one; tests/unit/infra/test_report_batches.py checks the two stay apart.
MAX_OUTPUT_BYTES = 64 * 1024
MAX_ERROR_CHARS = 8 * 1024


def bound_output(output: bytes) -> tuple[bytes, bool]:
    if len(output) <= MAX_OUTPUT_BYTES:
        return output, False
    return output[:MAX_OUTPUT_BYTES], True


@dataclass(slots=True)
class RunningAttempt:
    """An attempt whose handler is executing on this worker."""

    job_id: str
    key: tuple[str, int]
    context: HandlerContext
    # When the handler is told to stop by itself: its attempt's timeout.
    timeout_at: datetime
    thread_id: int | None = None
    # Set once the handler has been told; it is stopped by force at this time.
    stop_at: datetime | None = None
    stop_reason: str = ""
    # Whose slot it holds (worker/slot_share.py).
    tenant: str = ""
    # The job's heartbeat timeout, from the dispatch: the worker heartbeats the attempt
    # often enough for it (worker/running_attempts.py). None: the worker's interval.
    heartbeat_timeout: timedelta | None = None


def context_of(record: Mapping[str, object]) -> HandlerContext:
    """What a handler is given, read from its dispatch."""
    return HandlerContext(
        run_id=as_uuid(record["run_id"]),
        job_id=as_uuid(record["job_id"]),
        attempt=int(str(record["attempt"])),
        idempotency_key=str(record["idempotency_key"]),
        payload=bytes(record["payload"]),  # type: ignore[call-overload]
        scheduled_at=record["scheduled_at"],  # type: ignore[arg-type]
        timeout_seconds=int(str(record["timeout_ms"])) / 1000.0,
    )


def invoke(handlers: HandlerRegistry, record: Mapping[str, object],
           ctx: HandlerContext) -> tuple[str, bytes, str | None]:
    """Runs the attempt's handler: (outcome, output, error). A handler's exception is the
    attempt's failure; only a forced stop the worker did not ask for passes through."""
    try:
        handler = handlers.get(str(record["handler"]))
        return "succeeded", handler(ctx), None
    except HandlerFailed as exc:
        return "failed", exc.output, f"{exc.error_type}: {exc}"[:MAX_ERROR_CHARS]
    except AttemptStopped:
        if ctx.cancelled.is_set():
            return "failed", b"", "Stopped: by the worker"
        raise
    except Exception as exc:  # a handler's bug is the attempt's failure, not the worker's
        detail = "".join(traceback.format_exception_only(exc)).strip()
        return "failed", b"", f"{type(exc).__name__}: {detail}"[:MAX_ERROR_CHARS]
