"""The failover-lag timeline: windows never overlap, every change has its window, and every
scheduler stopped on purpose or by failure comes back."""

from __future__ import annotations

from itertools import pairwise

import pytest

from tests.chaos.lag_timeline import Step, plan

SESSION_TIMEOUT_S = 10


@pytest.mark.parametrize("rounds", [1, 2, 5])
def test_windows_tile_the_firing_without_overlap(rounds: int) -> None:
    timeline = plan(rounds, SESSION_TIMEOUT_S)
    spans = timeline.spans
    assert spans[0].kind == "baseline" and spans[0].start_s > 0
    for before, after in pairwise(spans):
        assert before.start_s < before.end_s == after.start_s
    assert spans[-1].end_s == timeline.seconds
    assert [s.at_s for s in timeline.steps] == sorted(s.at_s for s in timeline.steps)


def test_one_round_has_each_change_once_in_order() -> None:
    timeline = plan(1, SESSION_TIMEOUT_S)
    assert [s.kind for s in timeline.spans] == ["baseline", "sigterm", "added", "kill",
                                                "freeze"]
    assert [(s.action, s.scheduler) for s in timeline.steps] == [
        ("sigterm", "scheduler-1"), ("start", "scheduler-1"), ("start", "scheduler-4"),
        ("kill", "scheduler-2"), ("start", "scheduler-2"),
        ("stop", "scheduler-3"), ("cont", "scheduler-3")]
    # Bounded for `make test`.
    assert timeline.seconds <= 100


def test_each_change_opens_its_window() -> None:
    timeline = plan(2, SESSION_TIMEOUT_S)
    opening = {"sigterm": "sigterm", "added": "start", "kill": "kill", "freeze": "stop"}
    for span in timeline.spans[1:]:
        assert any(s.at_s == span.start_s and s.action == opening[span.kind]
                   for s in timeline.steps), span


def test_a_killed_or_frozen_scheduler_returns_only_after_its_session_has_expired() -> None:
    steps = plan(3, SESSION_TIMEOUT_S).steps
    for step in steps:
        if step.action in ("kill", "stop"):
            back = _next(steps, step)
            assert back.at_s - step.at_s > SESSION_TIMEOUT_S


def test_later_rounds_scale_down_what_the_previous_round_added() -> None:
    steps = plan(3, SESSION_TIMEOUT_S).steps
    added = [s.scheduler for s in steps if s.action == "start" and s.scheduler not in
             ("scheduler-1", "scheduler-2")]
    assert added == ["scheduler-4", "scheduler-5", "scheduler-6"]
    scaled_down = [s.scheduler for s in steps if s.action == "sigterm"
                   and s.scheduler != "scheduler-1"]
    assert scaled_down == ["scheduler-4", "scheduler-5"]


def test_a_timeline_needs_a_round_and_three_schedulers() -> None:
    with pytest.raises(ValueError, match="rounds"):
        plan(0, SESSION_TIMEOUT_S)
    with pytest.raises(ValueError, match="schedulers"):
        plan(1, SESSION_TIMEOUT_S, schedulers=2)


def _next(steps: list[Step], step: Step) -> Step:
    return next(s for s in steps if s.at_s > step.at_s and s.scheduler == step.scheduler)
