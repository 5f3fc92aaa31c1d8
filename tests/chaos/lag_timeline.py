"""The failover-lag timeline: which scheduler changes happen when, and the window of fire
times whose start lag each one is judged by. Pure: offsets in seconds from the first fire
time; the test turns them into signals and instants."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    at_s: float
    action: str  # sigterm, start, kill, stop, cont
    scheduler: str


@dataclass(frozen=True)
class Span:
    """Fire times from start_s (inclusive) to end_s (exclusive)."""

    kind: str
    label: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    steps: list[Step]
    spans: list[Span]
    seconds: int  # fire times from 0 to this, inclusive


# The first seconds of firing are the cluster settling (first dispatches, connections), not
# the steady state the baseline stands for.
SETTLE_S = 3
BASELINE_S = 12
RESTART_AFTER_S = 6  # a rolling restart: the process is started again this much later
SIGTERM_S = 18
ADDED_S = 15
# A killed or frozen scheduler's partitions wait for the session timeout; it comes back
# a little after they have surely moved, so its return is a rebalance of its own.
BACK_AFTER_TIMEOUT_S = 5
AFTER_RETURN_S = 8


def plan(rounds: int, session_timeout_s: int, schedulers: int = 3) -> Timeline:
    """`rounds` repetitions of: SIGTERM and restart, a scheduler added, kill -9 and restart,
    freeze past the session timeout and thaw. Each window ends where the next begins, so no
    run is counted twice. From the second round on, the scheduler the previous round added
    is stopped with SIGTERM first (a scale-down), so each round adds one to the same base."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if schedulers < 3:
        raise ValueError(f"the timeline needs at least 3 schedulers, got {schedulers}")
    restarted, killed, frozen = (f"scheduler-{i}" for i in (1, 2, 3))
    away = session_timeout_s + BACK_AFTER_TIMEOUT_S
    steps: list[Step] = []
    spans: list[Span] = []
    t = 0.0
    for r in range(1, rounds + 1):
        added = f"scheduler-{schedulers + r}"
        if r == 1:
            spans.append(Span("baseline", "baseline (no change)", SETTLE_S, BASELINE_S))
        else:
            leaving = f"scheduler-{schedulers + r - 1}"
            steps.append(Step(t, "sigterm", leaving))
            spans.append(Span("sigterm", f"round {r}: SIGTERM {leaving} (scale down)",
                              t, t + BASELINE_S))
        t += BASELINE_S
        steps += [Step(t, "sigterm", restarted), Step(t + RESTART_AFTER_S, "start", restarted)]
        spans.append(Span("sigterm", f"round {r}: SIGTERM {restarted}, back after "
                          f"{RESTART_AFTER_S}s", t, t + SIGTERM_S))
        t += SIGTERM_S
        steps.append(Step(t, "start", added))
        spans.append(Span("added", f"round {r}: {added} added", t, t + ADDED_S))
        t += ADDED_S
        steps += [Step(t, "kill", killed), Step(t + away, "start", killed)]
        spans.append(Span("kill", f"round {r}: kill -9 {killed}, back after {away}s",
                          t, t + away + AFTER_RETURN_S))
        t += away + AFTER_RETURN_S
        steps += [Step(t, "stop", frozen), Step(t + away, "cont", frozen)]
        spans.append(Span("freeze", f"round {r}: SIGSTOP {frozen} for {away}s",
                          t, t + away + AFTER_RETURN_S))
        t += away + AFTER_RETURN_S
    return Timeline(steps, spans, int(t))
