"""Waiting for a run to end: asked again until its status is one it never leaves, a run not
recorded yet waited for, other refusals raised at once, the timeout and its bounds."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from cronlog.client import ENDED_RUN_STATUSES, ApiError, RunWaitTimeout
from cronlog.client.run_waiting import wait_for_run
from cronlog.domain.run_states import TERMINAL_RUN
from cronlog.infra.grpc.convert import RUN_STATUS_PB
from cronlog.v1 import job_service_pb2 as pb


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def answers(*items: pb.Run | ApiError) -> Iterator[pb.Run | ApiError]:
    yield from items
    while True:
        yield items[-1]


def get_run_of(items: Iterator[pb.Run | ApiError]) -> tuple[list[str], object]:
    asked: list[str] = []

    def get_run(run_id: str) -> pb.Run:
        asked.append(run_id)
        item = next(items)
        if isinstance(item, ApiError):
            raise item
        return item

    return asked, get_run


def run(status: int) -> pb.Run:
    return pb.Run(run_id="r1", status=status)  # type: ignore[arg-type]


def test_the_statuses_a_run_never_leaves_are_the_domains() -> None:
    assert {RUN_STATUS_PB[s] for s in TERMINAL_RUN} == ENDED_RUN_STATUSES


def test_a_run_is_asked_for_until_it_ends_a_missing_one_waited_for() -> None:
    clock = Clock()
    asked, get_run = get_run_of(answers(
        ApiError(grpc.StatusCode.NOT_FOUND, "no run r1"), run(pb.RUN_STATUS_SCHEDULED),
        run(pb.RUN_STATUS_RUNNING), run(pb.RUN_STATUS_FAILED),  # a retry may follow
        run(pb.RUN_STATUS_DEAD_LETTERED)))
    ended = wait_for_run(get_run, "r1", 10, 0.5, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert ended.status == pb.RUN_STATUS_DEAD_LETTERED
    assert asked == ["r1"] * 5 and clock.sleeps == [0.5] * 4


def test_the_wait_ends_at_its_timeout_with_how_the_run_stood() -> None:
    clock = Clock()
    _, get_run = get_run_of(answers(run(pb.RUN_STATUS_RUNNING)))
    with pytest.raises(RunWaitTimeout, match=r"run r1 had not ended within 2 s \(running\)") as e:
        wait_for_run(get_run, "r1", 2, 0.75, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert e.value.run is not None and e.value.run.status == pb.RUN_STATUS_RUNNING
    assert clock.now == 2 and clock.sleeps == [0.75, 0.75, 0.5]
    _, never = get_run_of(answers(ApiError(grpc.StatusCode.NOT_FOUND)))
    with pytest.raises(RunWaitTimeout, match="not recorded yet"):
        wait_for_run(never, "r1", 1, 0.5, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]


def test_another_refusal_is_raised_at_once() -> None:
    asked, get_run = get_run_of(answers(ApiError(grpc.StatusCode.PERMISSION_DENIED, "no")))
    with pytest.raises(ApiError, match="PERMISSION_DENIED"):
        wait_for_run(get_run, "r1", 10, 0.5, sleep=lambda s: None)  # type: ignore[arg-type]
    assert asked == ["r1"]


@pytest.mark.parametrize(("timeout", "poll", "named"), [
    (0, 0.5, "timeout"), (3601, 0.5, "timeout"), (10, 0.01, "poll"), (1, 2, "poll")])
def test_a_wait_out_of_bounds_is_refused_before_any_call(timeout: float, poll: float,
                                                         named: str) -> None:
    asked, get_run = get_run_of(answers(run(pb.RUN_STATUS_SUCCEEDED)))
    with pytest.raises(ValueError, match=f"^{named}: between"):
        wait_for_run(get_run, "r1", timeout, poll)  # type: ignore[arg-type]
    assert asked == []
