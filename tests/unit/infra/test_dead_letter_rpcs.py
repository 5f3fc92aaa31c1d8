"""RedriveDeadLetters at the gRPC edge (infra/grpc/dead_letter_rpcs.py) and its charge
(tenant_budget): a missing `since` or a job id that is no UUID names its field; each run's
outcome and error as RedriveRun would answer it; the call costs its limit in commands."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from cronlog.commands.api.dead_letters import MOST_RUNS, Outcome, RunRedriven
from cronlog.commands.api.job_api import CommandRejected
from cronlog.commands.api.ports import DeadLetter
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc.dead_letter_rpcs import redrive_request, redriven_out
from cronlog.infra.grpc.tenant_budget import COMMAND_RATE, Charge, charge_of
from cronlog.v1 import job_service_pb2 as pb

RUN = DeadLetter(uuid.UUID(int=1), uuid.UUID(int=2), datetime(2026, 11, 1, tzinfo=UTC))


def test_since_is_required_and_a_job_id_must_be_a_uuid() -> None:
    with pytest.raises(InvalidSpec) as missing:
        redrive_request(pb.RedriveDeadLettersRequest(request_id="r"), "acme", "acme")
    assert missing.value.field == "since"
    bad = pb.RedriveDeadLettersRequest(request_id="r", job_id="nope")
    bad.since.FromDatetime(RUN.scheduled_at)
    with pytest.raises(InvalidSpec) as not_uuid:
        redrive_request(bad, "acme", "acme")
    assert not_uuid.value.field == "job_id"


def test_the_request_becomes_the_apis_with_until_left_to_now_when_absent() -> None:
    request = pb.RedriveDeadLettersRequest(request_id="r", job_id=str(RUN.job_id), limit=5)
    request.since.FromDatetime(RUN.scheduled_at)
    asked = redrive_request(request, "acme", "someone")
    assert (asked.tenant, asked.job_id, asked.since, asked.until, asked.limit,
            asked.requested_by) == ("acme", RUN.job_id, RUN.scheduled_at, None, 5, "someone")


def test_each_outcome_and_failure_is_answered_as_redrive_run_would() -> None:
    done = redriven_out(RunRedriven(RUN, Outcome.REDRIVEN))
    assert (done.run_id, done.job_id, done.outcome, done.HasField("error")) == (
        str(RUN.run_id), str(RUN.job_id), pb.REDRIVE_OUTCOME_REDRIVEN, False)
    assert done.scheduled_at.ToDatetime(tzinfo=UTC) == RUN.scheduled_at
    refused = redriven_out(RunRedriven(RUN, Outcome.FAILED, CommandRejected(
        "FAILED_PRECONDITION", "job deleted", "run_id")))
    assert (refused.outcome, refused.error.code, refused.error.message, refused.error.field
            ) == (pb.REDRIVE_OUTCOME_FAILED, "FAILED_PRECONDITION", "job deleted", "run_id")
    bug = redriven_out(RunRedriven(RUN, Outcome.FAILED, KeyError("x")))
    assert bug.error.code == "INTERNAL" and "x" not in bug.error.message


@pytest.mark.parametrize(("limit", "cost"), [(1, 1), (40, 40), (0, MOST_RUNS),
                                             (MOST_RUNS + 1, MOST_RUNS), (-5, MOST_RUNS)])
def test_the_call_costs_one_command_per_run_it_may_redrive(limit: int, cost: int) -> None:
    assert charge_of("RedriveDeadLetters", pb.RedriveDeadLettersRequest(limit=limit)) == Charge(
        COMMAND_RATE, cost)
