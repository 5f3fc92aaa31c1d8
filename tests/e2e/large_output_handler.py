"""A handler whose output is as large as a worker keeps (64 KiB), different for every run.

Loaded with CRONLOG_HANDLER_MODULES=tests.e2e.large_output_handler: bursts of its finish
reports are what once made WorkerReports messages larger than the broker takes.
"""

from __future__ import annotations

from uuid import UUID

from cronlog.worker.handler_context import HandlerContext
from cronlog.worker.handlers import HandlerRegistry

OUTPUT_BYTES = 64 * 1024


def output_of(run_id: UUID) -> bytes:
    """ASCII, so that history (which keeps outputs as text) gives back the same bytes."""
    return run_id.hex.encode() * (OUTPUT_BYTES // 32)


def large_output(ctx: HandlerContext) -> bytes:
    return output_of(ctx.run_id)


def register(registry: HandlerRegistry) -> None:
    registry.register("large_output", large_output)
