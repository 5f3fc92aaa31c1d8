"""GetRun's Attempt carries its last progress (details and time) from the history's row."""

from __future__ import annotations

from dataclasses import replace
from uuid import uuid4

from cronlog.infra.grpc.convert import run_out
from cronlog.projections.history import AttemptRow

AT_US = 1_900_000_000_000_000


def test_an_attempts_progress_and_its_time_reach_getrun_and_none_stays_unset() -> None:
    run = AttemptRow(scheduled_at_us=AT_US, tenant="t", job_id=str(uuid4()),
                     run_id=str(uuid4()), attempt=0, queue="default", handler="h",
                     trigger="schedule", max_attempts=2, run_status="running",
                     attempt_status="none")
    first = replace(run, attempt=1, attempt_status="lost")
    second = replace(run, attempt=2, attempt_status="running", progress='{"done":3}',
                     progress_at_us=AT_US + 1_500_000)
    quiet, beating = run_out([run, first, second]).attempts
    assert quiet.progress == b"" and not quiet.HasField("progress_at")
    assert beating.progress == b'{"done":3}'
    assert beating.progress_at.ToMicroseconds() == AT_US + 1_500_000
