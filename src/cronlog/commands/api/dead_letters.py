"""RedriveDeadLetters (issue 37 item 4, docs/lifecycle.md "Re-driving dead letters"): a
tenant's dead letters, chosen by job and by a window of fire times, each re-driven as
RedriveRun re-drives one.

The api reads at most `limit` (1 to MOST_RUNS) dead-lettered runs from the state store, then
sends one RedriveRun per run, all at once, with the request id `<request_id>/<run_id>`: the
owner's request-id dedupe makes a retried call re-drive no run twice, and a call for the
next ones (a new request id) finds only what is still dead-lettered. Each run's answer is
its own (DESIGN invariant 9): one that is no longer a dead letter when its owner decides (a
race with another re-drive) is reported as such, one refused or unanswered as failed, and
the others go on.

Cost (invariant 12): one bounded read of at most MOST_RUNS + 1 rows, then at most MOST_RUNS
commands sent in one wave within the call's deadline, in the tenant's turn of the api's
batch waves (job_batch.TenantTurns), and at most MOST_RUNS row reads to explain refusals.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any
from uuid import UUID

from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.job_batch import ItemNotSent, TenantTurns
from cronlog.commands.api.ports import BatchCommandBus, DeadLetter, DeadLetterReader, JobReader
from cronlog.commands.messages import RedriveRun
from cronlog.domain.bounds import require_in_range
from cronlog.domain.errors import InvalidSpec
from cronlog.ports import Clock

# Runs one call re-drives at most, and by default.
MOST_RUNS = 100
# The widest window of fire times one call looks at: a bounded read however many dead
# letters a tenant has, and a deliberate choice of what to run again.
LONGEST_WINDOW = timedelta(days=31)
# Each run's command carries `<request_id>/<run_id>`, within the 200 characters a request
# id may have: 200 - len("/") - 36.
MOST_REQUEST_ID_CHARS = 163
DEAD_LETTERED = "dead_lettered"


class Outcome(Enum):
    REDRIVEN = "redriven"
    REDRIVEN_BEFORE = "redriven_before"
    NOT_DEAD_LETTERED = "not_dead_lettered"
    FAILED = "failed"


@dataclass(frozen=True)
class RedriveRequest:
    request_id: str
    tenant: str
    job_id: UUID | None
    since: datetime
    # None: now.
    until: datetime | None
    # 0: MOST_RUNS.
    limit: int
    # Who asked, for the audit (RunRedriven.requested_by).
    requested_by: str = ""


@dataclass(frozen=True)
class RedriveWindow:
    """A request once checked: what to read and how many."""

    request_id: str
    tenant: str
    job_id: UUID | None
    since: datetime
    until: datetime
    limit: int


@dataclass(frozen=True)
class RunRedriven:
    run: DeadLetter
    outcome: Outcome
    # With Outcome.FAILED: why, for the edge to turn into a status.
    error: Exception | None = None


@dataclass(frozen=True)
class RedriveAnswer:
    runs: list[RunRedriven]
    # More dead letters of the window were left for another call.
    more: bool


def checked(request: RedriveRequest, now: datetime) -> RedriveWindow:
    """The request's window and limit, or InvalidSpec naming the field; nothing is read."""
    request_id = request.request_id
    if not request_id or len(request_id) > MOST_REQUEST_ID_CHARS:
        raise InvalidSpec("request_id", f"a request id of 1 to {MOST_REQUEST_ID_CHARS} "
                                        "characters is required (each run's command "
                                        "carries it with the run id)")
    if not request.tenant:
        raise InvalidSpec("tenant", "a tenant is required (dead letters are one tenant's)")
    if not 0 <= request.limit <= MOST_RUNS:
        raise InvalidSpec("limit", f"must be between 1 and {MOST_RUNS} (0 means "
                                   f"{MOST_RUNS}), got {request.limit}")
    since = require_in_range(request.since, "since")
    until = require_in_range(request.until if request.until is not None else now, "until")
    if since >= until:
        raise InvalidSpec("until", f"{until.isoformat()} must be after since "
                                   f"{since.isoformat()}")
    if until - since > LONGEST_WINDOW:
        raise InvalidSpec("since", f"the window since..until is at most "
                                   f"{LONGEST_WINDOW.days} days, got {until - since}")
    return RedriveWindow(request_id, request.tenant, request.job_id, since, until,
                         request.limit or MOST_RUNS)


@dataclass
class DeadLetterRedrive:
    bus: BatchCommandBus
    dead_letters: DeadLetterReader
    # Reads a run's row again, to tell a race from a refusal.
    runs: JobReader
    clock: Clock
    reply_timeout: float = 15.0
    turns: TenantTurns | None = None

    def redrive(self, request: RedriveRequest) -> RedriveAnswer:
        now = self.clock.now()
        window = checked(request, now)
        deadline = time.monotonic() + self.reply_timeout
        found = self.dead_letters.dead_letters(window.tenant, window.job_id, window.since,
                                               window.until, window.limit + 1)
        chosen = found[:window.limit]
        commands = [RedriveRun(request_id=f"{window.request_id}/{run.run_id}",
                               job_id=run.job_id, run_id=run.run_id, at=now,
                               requested_by=request.requested_by) for run in chosen]
        replies = self._send(commands, window.tenant, deadline)
        return RedriveAnswer([self._outcome(run, reply) for run, reply
                              in zip(chosen, replies, strict=True)],
                             more=len(found) > window.limit)

    def _send(self, commands: Sequence[RedriveRun], tenant: str,
              deadline: float) -> list[Mapping[str, Any] | Exception]:
        """Every command at once, in the tenant's turn when the api has turns."""
        if not commands:
            return []
        not_sent: list[Mapping[str, Any] | Exception] = [ItemNotSent(
            "the call's deadline passed before this run's command was sent; call again "
            "with the same request id")] * len(commands)
        turn = self.turns.of(tenant) if self.turns is not None else None
        left = deadline - time.monotonic()
        if left <= 0 or (turn is not None and not turn.acquire(timeout=left)):
            return not_sent
        try:
            return self.bus.send_many(commands, max(0.05, deadline - time.monotonic()))
        finally:
            if turn is not None:
                turn.release()

    def _outcome(self, run: DeadLetter, reply: Mapping[str, Any] | Exception) -> RunRedriven:
        if isinstance(reply, Exception):
            return RunRedriven(run, Outcome.FAILED, reply)
        if reply["ok"]:
            return RunRedriven(run, Outcome.REDRIVEN_BEFORE if reply.get("repeated")
                               else Outcome.REDRIVEN)
        # A refusal of a run that is no longer a dead letter is the race a concurrent
        # re-drive (or cancel) makes, not this call's failure.
        row = self.runs.run(run.run_id)
        if row is not None and row.status != DEAD_LETTERED:
            return RunRedriven(run, Outcome.NOT_DEAD_LETTERED)
        field = reply.get("error_field")
        return RunRedriven(run, Outcome.FAILED, CommandRejected(
            str(reply.get("error_code") or "INTERNAL"),
            str(reply.get("error_message") or "command rejected"),
            str(field) if field else None))
