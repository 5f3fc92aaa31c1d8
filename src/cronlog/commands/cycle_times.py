"""How long an owner's cycles take, and so how much of the lookahead is left when its
dispatches become visible to workers.

A run enters the lookahead window just after one fire step began, waits for the next one,
and is readable by a worker once that step's transaction commits. Its due time is then at
least `lookahead - (gap between fire steps) - (the fire step's stamp to its commit)` away;
once that is below zero, runs start late however fast the workers are. Logged as one line
per interval, a warning when the lookahead was used up."""

from __future__ import annotations

import time
from datetime import timedelta

STEPS = ("fire", "inbox")


class CycleTimes:
    def __init__(self, lookahead: timedelta,
                 interval: timedelta = timedelta(seconds=10)) -> None:
        self._lookahead = lookahead.total_seconds()
        self._interval = interval.total_seconds()
        self._since: float | None = None
        self._last_fire: float | None = None
        self._reset()

    def _reset(self) -> None:
        self._steps = 0
        self._longest_gap = 0.0
        # The longest stamp-to-commit of each step, with its decide / transaction / apply
        # parts and how many messages it wrote.
        self._longest: dict[str, tuple[float, float, float, float, int]] = dict.fromkeys(
            STEPS, (0.0, 0.0, 0.0, 0.0, 0))
        self._least_lead = self._lookahead

    def step(self, kind: str, stamped: float, committing: float, committed: float,
             applied: float, written: int) -> None:
        """One committed step: when its clock was read, when its transaction began and
        ended, and when its events were applied (time.monotonic() values)."""
        self._steps += 1
        took = committed - stamped
        if took > self._longest[kind][0]:
            self._longest[kind] = (took, committing - stamped, committed - committing,
                                   applied - committed, written)
        if kind != "fire":
            return
        if self._last_fire is not None:
            gap = stamped - self._last_fire
            self._longest_gap = max(self._longest_gap, gap)
            self._least_lead = min(self._least_lead, self._lookahead - gap - took)
        self._last_fire = stamped

    def report(self, now: float | None = None) -> tuple[bool, str] | None:
        """(whether the lookahead ran out, a line) once per interval with committed steps."""
        now = time.monotonic() if now is None else now
        if self._since is None:
            self._since = now
        if now - self._since < self._interval:
            return None
        line = None
        if self._steps:
            parts = []
            for kind in STEPS:
                took, decide, commit, apply, written = self._longest[kind]
                parts.append(f"{kind} step {took * 1000:.0f} ms (decide {decide * 1000:.0f}, "
                             f"transaction {commit * 1000:.0f}, then apply "
                             f"{apply * 1000:.0f}; {written} messages)")
            line = (f"{self._steps} steps in the last {now - self._since:.0f} s; longest gap "
                    f"between fire steps {self._longest_gap * 1000:.0f} ms; longest "
                    + "; longest ".join(parts)
                    + f"; least lookahead left at a commit {self._least_lead * 1000:.0f} ms")
        ran_out = self._least_lead < 0
        self._since = now
        self._reset()
        return None if line is None else (ran_out, line)
