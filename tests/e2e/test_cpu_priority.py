"""Every thread of the worker runs at its raised CPU priority, every thread of the history
projector at its lowered one (Linux keeps niceness per thread)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.e2e.conftest import RunningService
from tests.support.polling import wait_for


def thread_niceness(pid: int) -> dict[int, int]:
    niceness = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        # Fields after the command name, which may hold spaces, in parentheses.
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        niceness[int(task.name)] = int(fields[16])
    return niceness


def test_worker_threads_run_raised_and_projector_threads_lowered(
        service: RunningService) -> None:
    may_raise = os.geteuid() == 0
    # Relative to the niceness the roles start at, this session's (make test may run it at
    # another than 0); Linux keeps niceness within -20..19.
    base = os.nice(0)
    expected = {"worker": max(-20, base - 5) if may_raise else base,
                "projector": min(19, base + 10), "scheduler": base}

    def threads_started() -> bool:
        # The Kafka clients' threads start with the consumers: more than the main thread.
        return all(len(thread_niceness(service.processes[r].pid)) > 3 for r in expected)

    wait_for(threads_started, 30, "worker, projector and scheduler threads started")
    for role, nice in expected.items():
        seen = thread_niceness(service.processes[role].pid)
        assert set(seen.values()) == {nice}, f"{role}: {seen}"
