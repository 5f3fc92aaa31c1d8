"""The run page: a run and its attempts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo

from cronlog.console.pages.common import When, own, when
from cronlog.console.ports import Credentials, JobsApi, RunSummary

# Output shown on the run page; the rest stays in the history (the api bounds it too).
OUTPUT_SHOWN = 64 * 1024


@dataclass(frozen=True)
class AttemptView:
    number: int
    status: str
    worker: str
    dispatched: When | None
    started: When | None
    finished: When | None
    start_lag_seconds: float | None
    output: str
    output_cut: bool
    output_truncated: bool
    error: str
    # The handler's last progress (at most 1 KiB), as text like the output, and when.
    progress: str = ""
    progressed: When | None = None


@dataclass(frozen=True)
class RunView:
    run: RunSummary
    scheduled: When | None
    attempts: Sequence[AttemptView]
    cancellable: bool
    # A dead letter can be re-driven (RedriveRun).
    redrivable: bool = False


def run_view(api: JobsApi, who: Credentials, run_id: str, viewer_zone: tzinfo) -> RunView:
    run = api.get_run(who, run_id)
    own(who, run.tenant, "run", run_id)
    utc = UTC
    attempts = [AttemptView(a.number, a.status, a.worker, when(a.dispatched_at, utc, viewer_zone),
                            when(a.started_at, utc, viewer_zone),
                            when(a.finished_at, utc, viewer_zone), a.start_lag_seconds,
                            # Shown as text (escaped by the template); bytes that are not
                            # UTF-8 appear as replacement characters.
                            a.output[:OUTPUT_SHOWN].decode("utf-8", "replace"),
                            len(a.output) > OUTPUT_SHOWN, a.output_truncated, a.error,
                            a.progress.decode("utf-8", "replace"),
                            when(a.progress_at, utc, viewer_zone))
                for a in run.attempts]
    return RunView(run, when(run.scheduled_at, utc, viewer_zone), attempts,
                   run.status in ("scheduled", "running"), run.status == "dead_lettered")
