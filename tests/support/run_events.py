"""The run events of one run that succeeded at its first attempt, as the history projector
reads them."""

from __future__ import annotations

from datetime import datetime, timedelta


def scheduled(run_id: str, job_id: str, at: datetime, tenant: str = "t") -> list[
        tuple[str, dict[str, object]]]:
    base = {"run_id": run_id, "job_id": job_id}
    return [("RunScheduled", {**base, "version": 1, "at": at, "tenant": tenant, "queue": "q",
                              "handler": "echo", "scheduled_at": at, "not_before": at,
                              "trigger": "schedule", "max_attempts": 3}),
            ("AttemptDispatched", {**base, "version": 2, "at": at, "attempt": 1,
                                   "not_before": at, "timeout_ms": 1000}),
            ("AttemptStarted", {**base, "version": 3, "at": at, "attempt": 1, "worker": "w",
                                "started_at": at + timedelta(milliseconds=25)}),
            ("AttemptSucceeded", {**base, "version": 4, "at": at, "attempt": 1, "worker": "w",
                                  "finished_at": at + timedelta(seconds=1), "output": b"ok",
                                  "output_truncated": False}),
            ("RunSucceeded", {**base, "version": 5, "at": at})]
