"""RedriveDeadLetters at the gRPC edge (issue 37 item 4, docs/lifecycle.md "Re-driving dead
letters"), as a mixin of JobServiceServicer (whose module is full).

Scoping first, as every tenant RPC: a request naming another tenant is PERMISSION_DENIED,
another tenant's job NOT_FOUND, both before anything is read or sent. The request's own
errors are answered with their status (error_status); each run's outcome is its own, with
the status RedriveRun would have answered when it failed. The call costs `limit` commands of
the tenant's budget (tenant_budget.charge_of).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from uuid import UUID

import grpc

from cronlog.commands.api.dead_letters import (
    DeadLetterRedrive,
    Outcome,
    RedriveRequest,
    RunRedriven,
)
from cronlog.commands.api.job_batch import TenantTurns
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc import convert
from cronlog.infra.grpc.channel_rpcs import answered
from cronlog.infra.grpc.error_status import abort, status_of
from cronlog.v1 import job_service_pb2 as pb

log = logging.getLogger(__name__)

DEADLINE_MARGIN = 0.25
MOST_COMMAND_WAIT = 120.0
MOST_MESSAGE_CHARS = 1024

OUTCOMES = {Outcome.REDRIVEN: pb.REDRIVE_OUTCOME_REDRIVEN,
            Outcome.REDRIVEN_BEFORE: pb.REDRIVE_OUTCOME_REDRIVEN_BEFORE,
            Outcome.NOT_DEAD_LETTERED: pb.REDRIVE_OUTCOME_NOT_DEAD_LETTERED,
            Outcome.FAILED: pb.REDRIVE_OUTCOME_FAILED}


def redriven_out(item: RunRedriven) -> pb.RedrivenDeadLetter:
    out = pb.RedrivenDeadLetter(run_id=str(item.run.run_id), job_id=str(item.run.job_id),
                                scheduled_at=convert.timestamp_out(item.run.scheduled_at),
                                outcome=OUTCOMES[item.outcome])
    if item.error is not None:
        status = status_of(item.error)
        if status is None:
            # A bug shows in the log, not in a caller's answer; the other runs go on.
            log.error("RedriveDeadLetters: run %s failed unexpectedly", item.run.run_id,
                      exc_info=item.error)
            out.error.CopyFrom(pb.ItemError(code="INTERNAL", message="internal error; the "
                                            "run was not re-driven"))
        else:
            out.error.CopyFrom(pb.ItemError(code=status.code.name,
                                            message=status.message[:MOST_MESSAGE_CHARS],
                                            field=status.field or ""))
    return out


def redrive_request(request: pb.RedriveDeadLettersRequest, tenant: str,
                    requested_by: str) -> RedriveRequest:
    if not request.HasField("since"):
        raise InvalidSpec("since", "is required: the earliest fire time to re-drive")
    job_id = None
    if request.job_id:
        try:
            job_id = UUID(request.job_id)
        except ValueError:
            raise InvalidSpec("job_id", f"{request.job_id!r} is not a UUID") from None
    return RedriveRequest(
        request_id=request.request_id, tenant=tenant, job_id=job_id,
        since=convert.timestamp_in(request.since, "since"),
        until=convert.timestamp_in(request.until, "until")
        if request.HasField("until") else None,
        limit=request.limit, requested_by=requested_by)


class DeadLetterRpcs:
    """RedriveDeadLetters of JobServiceServicer; `serve_dead_letters` gives it its api
    (without one it is UNAVAILABLE)."""

    _dead_letters: DeadLetterRedrive | None = None
    _batch_turns: TenantTurns  # JobServiceServicer's, shared with CreateJobs

    def serve_dead_letters(self, api: DeadLetterRedrive | None) -> None:
        """A tenant's re-drive commands wait for its turn of the api's batch waves, as its
        CreateJobs commands do (job_batch.TenantTurns)."""
        self._dead_letters = api if api is None or api.turns is not None else replace(
            api, turns=self._batch_turns)

    def _scope(self, context: grpc.ServicerContext, *, job_id: str | None = None,
               run_id: str | None = None, tenant: tuple[str, str] | None = None
               ) -> str | None:
        raise NotImplementedError  # JobServiceServicer's

    def _dead_letter_api(self, context: grpc.ServicerContext) -> DeadLetterRedrive:
        if self._dead_letters is None:
            abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot re-drive dead letters")
        api = self._dead_letters
        remaining = context.time_remaining()
        if remaining is None:
            return api
        return replace(api, reply_timeout=min(max(remaining - DEADLINE_MARGIN, 0.05),
                                              MOST_COMMAND_WAIT))

    @answered
    def RedriveDeadLetters(self, request: pb.RedriveDeadLettersRequest,
                           context: grpc.ServicerContext) -> pb.RedriveDeadLettersResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        if request.job_id:
            self._scope(context, job_id=request.job_id)
        tenant = caller or request.tenant
        who = caller or f"caller at {context.peer()}"  # an open api knows no tenant
        answer = self._dead_letter_api(context).redrive(
            redrive_request(request, tenant, who))
        return pb.RedriveDeadLettersResponse(runs=[redriven_out(r) for r in answer.runs],
                                             more=answer.more)
