"""RedriveDeadLetters' api (commands/api/dead_letters.py): bad input names its field and
reads and sends nothing; the tenant's dead letters of the window are read at most limit + 1
(`more` says whether one was left); each gets one RedriveRun with `<request_id>/<run_id>`,
sent at once; each run's answer is its own: re-driven, re-driven before (the owner's
request-id dedupe), no longer a dead letter (a race), or failed with the owner's status."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from cronlog.commands.api.dead_letters import (
    LONGEST_WINDOW,
    MOST_REQUEST_ID_CHARS,
    MOST_RUNS,
    DeadLetterRedrive,
    Outcome,
    RedriveRequest,
)
from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.job_batch import ItemNotSent, TenantTurns
from cronlog.commands.api.ports import DeadLetter
from cronlog.commands.messages import CommandMessage, RedriveRun
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.kafka.command_channel import CommandNotAnswered
from tests.support.clock import T0, FakeClock

JOB = uuid.UUID(int=7)


@dataclass
class Row:
    status: str


@dataclass
class DeadLetters:
    """The runs table's dead letters of tenant "acme", and the reads made of it."""

    runs: list[DeadLetter] = field(default_factory=list)
    reads: list[tuple[str, UUID | None, datetime, datetime, int]] = field(default_factory=list)
    status: dict[UUID, str] = field(default_factory=dict)

    def dead_letters(self, tenant: str, job_id: UUID | None, since: datetime,
                     until: datetime, limit: int) -> list[DeadLetter]:
        self.reads.append((tenant, job_id, since, until, limit))
        chosen = [r for r in self.runs if tenant == "acme" and since <= r.scheduled_at < until
                  and (job_id is None or r.job_id == job_id)]
        return sorted(chosen, key=lambda r: (r.scheduled_at, r.run_id))[:limit]

    def run(self, run_id: UUID) -> Row | None:
        return Row(self.status.get(run_id, "dead_lettered"))

    def get(self, job_id: UUID) -> Any:
        return None

    def count_jobs(self, tenant: str) -> int:
        return 0


@dataclass
class Owners:
    """A batch bus answering each RedriveRun as its owner would: a request id seen before
    is answered `repeated`; a run in `refuse` is refused with that status."""

    seen: set[str] = field(default_factory=set)
    refuse: dict[UUID, str] = field(default_factory=dict)
    lost: set[UUID] = field(default_factory=set)
    batches: list[list[CommandMessage]] = field(default_factory=list)

    def send_many(self, commands: Sequence[CommandMessage],
                  timeout: float) -> list[Mapping[str, Any] | Exception]:
        self.batches.append(list(commands))
        replies: list[Mapping[str, Any] | Exception] = []
        for command in commands:
            assert isinstance(command, RedriveRun)
            if command.run_id in self.lost:
                replies.append(CommandNotAnswered("no reply within the deadline"))
            elif command.run_id in self.refuse:
                replies.append({"ok": False, "error_code": self.refuse[command.run_id],
                                "error_message": f"run {command.run_id} refused"})
            else:
                repeated = command.request_id in self.seen
                self.seen.add(command.request_id)
                replies.append({"ok": True, "repeated": repeated})
        return replies


def dead(n: int, minutes: int, job: UUID = JOB) -> DeadLetter:
    return DeadLetter(uuid.UUID(int=1000 + n), job, T0 - timedelta(minutes=minutes))


def request(**changes: Any) -> RedriveRequest:
    fields: dict[str, Any] = {"request_id": "req-1", "tenant": "acme", "job_id": None,
                              "since": T0 - timedelta(days=1), "until": None, "limit": 0,
                              "requested_by": "acme"}
    fields.update(changes)
    return RedriveRequest(**fields)


def api(store: DeadLetters, owners: Owners, turns: TenantTurns | None = None
        ) -> DeadLetterRedrive:
    return DeadLetterRedrive(bus=owners, dead_letters=store, runs=store, clock=FakeClock(),
                             turns=turns)


@pytest.mark.parametrize(("changes", "field_name"), [
    ({"request_id": ""}, "request_id"),
    ({"request_id": "r" * (MOST_REQUEST_ID_CHARS + 1)}, "request_id"),
    ({"tenant": ""}, "tenant"),
    ({"limit": -1}, "limit"),
    ({"limit": MOST_RUNS + 1}, "limit"),
    ({"since": T0 + timedelta(minutes=1)}, "until"),
    ({"since": T0, "until": T0}, "until"),
    ({"since": T0 - LONGEST_WINDOW - timedelta(seconds=1)}, "since"),
    ({"since": datetime(1969, 12, 31), "until": None}, "since"),
    ({"until": datetime(2100, 1, 2).astimezone()}, "until"),
])
def test_bad_input_names_its_field_and_reads_and_sends_nothing(
        changes: dict[str, Any], field_name: str) -> None:
    store, owners = DeadLetters([dead(1, 5)]), Owners()
    with pytest.raises(InvalidSpec) as refused:
        api(store, owners).redrive(request(**changes))
    assert refused.value.field == field_name
    assert store.reads == [] and owners.batches == []


def test_the_window_and_job_are_read_with_one_more_than_the_limit() -> None:
    store, owners = DeadLetters(), Owners()
    since, until = T0 - timedelta(days=31), T0 - timedelta(hours=1)
    answer = api(store, owners).redrive(request(job_id=JOB, since=since, until=until,
                                                limit=5))
    assert store.reads == [("acme", JOB, since, until, 6)]
    assert answer.runs == [] and not answer.more and owners.batches == []
    api(store, owners).redrive(request())
    assert store.reads[-1] == ("acme", None, T0 - timedelta(days=1), T0, MOST_RUNS + 1)


def test_each_dead_letter_gets_one_redrive_under_its_own_request_id_all_sent_at_once() -> None:
    runs = [dead(1, 30), dead(2, 10), dead(3, 20), dead(4, 60 * 25)]  # the last: too old
    store, owners = DeadLetters(runs), Owners()
    answer = api(store, owners).redrive(request(limit=2))
    assert [r.run for r in answer.runs] == [runs[0], runs[2]], "oldest first, at most limit"
    assert answer.more, "run 2 is left for the next call"
    assert [o.outcome for o in answer.runs] == [Outcome.REDRIVEN] * 2
    [batch] = owners.batches
    assert [(c.request_id, c.job_id, c.run_id, c.requested_by) for c in batch
            if isinstance(c, RedriveRun)] == [
        (f"req-1/{r.run_id}", JOB, r.run_id, "acme") for r in (runs[0], runs[2])]

    # The same call again (a retry): the owners answer each from its request id.
    again = api(store, owners).redrive(request(limit=2))
    assert [o.outcome for o in again.runs] == [Outcome.REDRIVEN_BEFORE] * 2


def test_a_run_no_longer_dead_lettered_is_reported_and_the_others_go_on() -> None:
    runs = [dead(1, 30), dead(2, 20), dead(3, 10), dead(4, 5)]
    store, owners = DeadLetters(runs), Owners()
    # Run 1 was re-driven by someone else since the read; run 2's job was deleted; run 3's
    # owner did not answer in time.
    owners.refuse = {runs[0].run_id: "FAILED_PRECONDITION",
                     runs[1].run_id: "FAILED_PRECONDITION"}
    store.status[runs[0].run_id] = "running"
    owners.lost = {runs[2].run_id}
    answer = api(store, owners).redrive(request())
    outcomes = [(o.outcome, type(o.error).__name__ if o.error else None) for o in answer.runs]
    assert outcomes == [(Outcome.NOT_DEAD_LETTERED, None),
                        (Outcome.FAILED, "CommandRejected"),
                        (Outcome.FAILED, "CommandNotAnswered"),
                        (Outcome.REDRIVEN, None)]
    refusal = answer.runs[1].error
    assert isinstance(refusal, CommandRejected) and refusal.status == "FAILED_PRECONDITION"
    assert not answer.more


def test_commands_wait_for_the_tenants_turn_and_are_not_sent_past_the_deadline() -> None:
    store, owners = DeadLetters([dead(1, 5)]), Owners()
    turns = TenantTurns(wave=100)
    redrive = api(store, owners, turns)
    redrive.reply_timeout = 0.2
    turn = turns.of("acme")
    turn.acquire()
    try:
        answer = redrive.redrive(request())
    finally:
        turn.release()
    assert owners.batches == []
    [item] = answer.runs
    assert item.outcome == Outcome.FAILED and isinstance(item.error, ItemNotSent)
    assert redrive.redrive(request()).runs[0].outcome == Outcome.REDRIVEN
