"""The scale workload's burst read from the workers' start reports (pure: records in)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronlog.domain.catalogue import Report
from cronlog_dev.bench.start_lag import ReportedStarts

T = datetime(2026, 12, 5, 3, 25, tzinfo=UTC)


def start(run: str, seconds: float) -> dict[str, object]:
    return {"run_id": run, "job_id": f"job-{run}", "attempt": 1,
            "started_at": T + timedelta(seconds=seconds)}


def test_single_and_gathered_start_reports_count_for_the_runs_asked_about() -> None:
    burst = ReportedStarts(["a", "b", "c", "d", "e"])
    burst.feed(Report.ATTEMPT_STARTED, {**start("a", 2.0), "worker": "w1"})
    burst.feed(Report.WORKER_REPORTS, {
        "worker": "w2",
        # a's retry started earlier than the report read first: the earliest counts
        "started": [start("a", 1.5), start("b", 0.25), start("other", 0.1)],
        # a finish is no start, unless it carries its start (WorkerReports v2)
        "finished": [{"run_id": "c", "started_at": None},
                     {"run_id": "e", "started_at": T + timedelta(seconds=0.75)}],
    })
    burst.feed("AttemptStarted", start("d", 0.5))  # a run event, not a report
    burst.feed("CreateJob", {"run_id": "d"})
    assert burst.expected == 5
    assert burst.started == 3
    assert sorted(burst.first_starts()) == [T + timedelta(seconds=0.25),
                                            T + timedelta(seconds=0.75),
                                            T + timedelta(seconds=1.5)]


def test_a_gathered_message_without_starts_counts_nothing() -> None:
    burst = ReportedStarts(["a"])
    burst.feed(Report.WORKER_REPORTS, {"worker": "w", "started": [], "finished": []})
    assert burst.started == 0
