"""Runs as gRPC messages no client refuses: gRPC clients take at most 4 MiB a message.

A run holds up to 100 attempts, each with up to 64 KiB of output and an error: one run can
outgrow a message, and a page of runs with large outputs did (a page of 120 backfilled
runs of 64 KiB each made ListRuns fail with RESOURCE_EXHAUSTED for its caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cronlog.projections.history import AttemptRow
from cronlog.v1 import job_service_pb2 as pb

# Well below gRPC's default 4 MiB, leaving room for the response's own fields.
MAX_RESPONSE_BYTES = 3 * 1024 * 1024
# A single run past this keeps only its last attempt's output (the others are marked
# truncated): the attempts themselves, their times and errors, stay.
MAX_RUN_BYTES = 1024 * 1024
# Errors of the earlier attempts of such a run are cut to this many characters.
EARLIER_ERROR_CHARS = 1024


def bounded_run(run: pb.Run) -> pb.Run:
    if run.ByteSize() <= MAX_RUN_BYTES:
        return run
    for attempt in run.attempts[:-1]:
        if attempt.output:
            attempt.output = b""
            attempt.output_truncated = True
        attempt.error = attempt.error[:EARLIER_ERROR_CHARS]
    return run


def bounded_page(rows: Sequence[list[AttemptRow]], run_out: Callable[[list[AttemptRow]], pb.Run],
                 token_after: Callable[[AttemptRow], str], next_token: str | None
                 ) -> tuple[list[pb.Run], str | None]:
    """As many of the page's runs as fit in one response (at least one), and the token of
    the page after them: the next one's when all fit, else one after the last run kept."""
    runs: list[pb.Run] = []
    kept: AttemptRow | None = None
    size = 0
    for attempts in rows:
        if not attempts:
            continue
        run = bounded_run(run_out(attempts))
        size += run.ByteSize() + 8
        if kept is not None and size > MAX_RESPONSE_BYTES:
            return runs, token_after(kept)
        runs.append(run)
        kept = attempts[0]
    return runs, next_token
