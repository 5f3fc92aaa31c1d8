"""Waiting for a run to end (`CronlogClient.wait_for_run`, `cronlog runs wait`): GetRun
again every `poll` seconds until the run's status is one it never leaves, for at most
`timeout` seconds. A run the history has not recorded yet (NOT_FOUND: a trigger's run
reaches ClickHouse a moment after it is made) is waited for like one that has not ended."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc

from cronlog.client.errors import ApiError
from cronlog.v1 import job_service_pb2 as pb

# The statuses a run never leaves (a FAILED run may still be retried).
ENDED_RUN_STATUSES = frozenset({
    pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_DEAD_LETTERED, pb.RUN_STATUS_CANCELLED,
    pb.RUN_STATUS_MISSED, pb.RUN_STATUS_SKIPPED})
# Bounds on what a caller may ask: an hour at most, at most 20 GetRun calls a second.
MAX_WAIT_S = 3600.0
MIN_POLL_S = 0.05


class RunWaitTimeout(Exception):
    """The run had not ended when the wait's time was up; `run` is how it stood last (None
    when the history had not recorded it yet)."""

    def __init__(self, run_id: str, timeout: float, run: pb.Run | None) -> None:
        state = ("not recorded yet" if run is None
                 else pb.RunStatus.Name(run.status).removeprefix("RUN_STATUS_").lower())
        super().__init__(f"run {run_id} had not ended within {timeout:g} s ({state})")
        self.run_id = run_id
        self.run = run


def check_wait(timeout: float, poll: float) -> None:
    if not 0 < timeout <= MAX_WAIT_S:
        raise ValueError(f"timeout: between 0 and {MAX_WAIT_S:g} seconds, not {timeout:g}")
    if not MIN_POLL_S <= poll <= timeout:
        raise ValueError(f"poll: between {MIN_POLL_S:g} s and the timeout, not {poll:g}")


def wait_for_run(get_run: Callable[[str], pb.Run], run_id: str, timeout: float, poll: float,
                 *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> pb.Run:
    """The run once it has ended; RunWaitTimeout when `timeout` passes first. Every other
    refusal (an id of another tenant's run, a malformed id) is raised at once."""
    check_wait(timeout, poll)
    deadline = clock() + timeout
    last: pb.Run | None = None
    while True:
        try:
            last = get_run(run_id)
        except ApiError as exc:
            if exc.code != grpc.StatusCode.NOT_FOUND:
                raise
        else:
            if last.status in ENDED_RUN_STATUSES:
                return last
        left = deadline - clock()
        if left <= 0:
            raise RunWaitTimeout(run_id, timeout, last)
        sleep(min(poll, left))
