"""How long an owner's cycles take, and how much further ahead it must fire for that.

A run enters the lookahead window just after one cycle read its clock, waits for the next
cycle to fire it, and is readable by a worker once that cycle's transaction commits: the
gap between the two cycles plus the second one's time to its commit is lost from its lead.
Under load that is seconds, and runs reached the workers after their time however fast the
workers were (docs/benchmarks.md). So the owner fires further ahead by the longest such loss
of the last interval or two (`extra`) beyond half the lookahead, at most twice the lookahead: a run
then has at least half the lookahead left when it reaches the workers. Losses within half
the lookahead (an owner that is not overloaded) change nothing: every-second jobs keep the
lookahead's worth of runs enqueued, which the in-flight limits and pauses see.

Each cycle's figures go to the operators' metrics (OwnerMetrics) as they are measured, and
one line per interval sums the same figures: cycles, messages in and events out, runs by
what happened to them, the least start lead a fired run had left, the longest cycle and its
parts, the extra lead, and the least lead any run can have had left; a warning when that
was below zero.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

from cronlog.commands.owner.cycle_tally import CREATED, DEAD_LETTERED, MISSED, SKIPPED
from cronlog.commands.owner.ports import CycleFigures, CycleTally, NoOwnerMetrics, OwnerMetrics


class CycleTimes:
    def __init__(self, lookahead: timedelta, interval: timedelta = timedelta(seconds=10),
                 monotonic: Callable[[], float] = time.monotonic,
                 metrics: OwnerMetrics | None = None) -> None:
        self._lookahead = lookahead.total_seconds()
        self._metrics = metrics or NoOwnerMetrics()
        self._max_extra = 2 * self._lookahead
        self._interval = interval.total_seconds()
        self._monotonic = monotonic
        self._since: float | None = None
        self._last_stamp: float | None = None
        # The extra lead the last cycle fired with.
        self._extra_then = 0.0
        # The longest loss of lead in this interval and in the one before.
        self._loss = 0.0
        self._previous_loss = 0.0
        self._reset()

    def _reset(self) -> None:
        self._cycles = 0
        self._longest_gap = 0.0
        # The longest stamp-to-commit, with its decide / transaction / apply parts and how
        # many messages the cycle wrote.
        self._longest = (0.0, 0.0, 0.0, 0.0, 0)
        self._least_lead: float | None = None
        # The sums of the interval's CycleFigures.
        self._messages = 0
        self._events = 0
        self._runs: Counter[str] = Counter()
        self._set_aside = 0
        self._refused = 0
        self._least_start_lead: float | None = None
        self._over_budget = 0
        self._carried = 0
        self._deferred = 0

    def extra(self) -> timedelta:
        """How much further ahead than the lookahead to fire now."""
        beyond = max(self._loss, self._previous_loss) - self._lookahead / 2
        return timedelta(seconds=min(max(beyond, 0.0), self._max_extra))

    def restart(self) -> None:
        """After a pause in the cycles (partitions taken or state re-read): the gap since
        the last cycle says nothing about how long cycles take."""
        self._last_stamp = None

    def cycle(self, stamped: float, committing: float, committed: float, applied: float,
              written: int, messages: int = 0, tally: CycleTally | None = None,
              over_budget: bool = False, carried: int = 0, deferred: int = 0) -> None:
        """One cycle: when it read its clock, when its transaction began and ended, and
        when its events were applied (monotonic seconds); the last three equal without a
        transaction. `messages`: inbox messages it handled; `tally`: what it committed;
        `over_budget`: it stopped taking work for its budget, leaving `carried` polled
        messages to the next cycle; `deferred`: messages left to the next because their
        tenant had spent its share of this one."""
        self._cycles += 1
        used = self.extra().total_seconds()
        tally = tally if tally is not None else CycleTally()
        # A cycle that consumed and wrote nothing has no transaction (PartitionOwner).
        transacted = bool(written or messages)
        self._metrics.cycle(CycleFigures(
            applied - stamped, committed - committing if transacted else None, messages,
            self._lookahead + used, tally, over_budget, carried, deferred))
        self._add(messages, tally)
        if over_budget:
            self._over_budget += 1
            self._carried += carried
        self._deferred += deferred
        took = committed - stamped
        if took > self._longest[0]:
            self._longest = (took, committing - stamped, committed - committing,
                             applied - committed, written)
        if self._last_stamp is not None:
            gap = stamped - self._last_stamp
            self._longest_gap = max(self._longest_gap, gap)
            loss = gap + took
            self._loss = max(self._loss, loss)
            lead = self._lookahead + self._extra_then - loss
            self._least_lead = lead if self._least_lead is None else min(self._least_lead, lead)
        self._last_stamp = stamped
        self._extra_then = used

    def _add(self, messages: int, tally: CycleTally) -> None:
        self._messages += messages
        self._events += tally.events
        if tally.runs:
            for (kind, _queue), count in tally.runs.items():
                self._runs[kind] += count
        self._set_aside += tally.set_aside
        if tally.refused:
            self._refused += sum(tally.refused.values())
        for leads in tally.leads.values():
            least = min(leads)
            if self._least_start_lead is None or least < self._least_start_lead:
                self._least_start_lead = least

    def _counts(self) -> str:
        runs = self._runs
        least = self._least_start_lead
        return (f"{self._messages} messages in, {self._events} events out; runs created "
                f"{runs[CREATED]}, missed {runs[MISSED]}, skipped {runs[SKIPPED]}, "
                f"dead-lettered {runs[DEAD_LETTERED]}; {self._set_aside} messages set aside, "
                f"{self._refused} commands refused; {self._over_budget} cycles out of "
                f"budget ({self._carried} messages left to the next), {self._deferred} "
                "messages deferred for their tenant's share; least start lead of "
                "a fired run " + ("-" if least is None else f"{least * 1000:.0f} ms"))

    def report(self) -> tuple[bool, str] | None:
        """(whether some run's lead ran out, a line) once per interval; the counts restart."""
        now = self._monotonic()
        if self._since is None:
            self._since = now
        if now - self._since < self._interval:
            return None
        took, decide, commit, apply, written = self._longest
        least = self._least_lead
        line = (f"{self._cycles} cycles in the last {now - self._since:.0f} s "
                f"({self._counts()}); longest "
                f"{took * 1000:.0f} ms to its commit (decide {decide * 1000:.0f}, transaction "
                f"{commit * 1000:.0f}, then apply {apply * 1000:.0f}; {written} messages); "
                f"longest gap between cycles {self._longest_gap * 1000:.0f} ms; firing "
                f"{self.extra().total_seconds() * 1000:.0f} ms further ahead than the "
                f"lookahead; least lead left at a commit "
                + ("-" if least is None else f"{least * 1000:.0f} ms"))
        ran_out = least is not None and least < 0
        self._since = now
        self._previous_loss, self._loss = self._loss, 0.0
        self._reset()
        return ran_out, line
