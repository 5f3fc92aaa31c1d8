"""VerifyHistory and WhatIf at the gRPC edge (issue 38, docs/verify.md), as a mixin of
JobServiceServicer (whose module is full).

Scoped first, as every tenant RPC: a tenant named that is not the caller's is
PERMISSION_DENIED, another tenant's job NOT_FOUND, before the log is read. Each answer's
lists are cut at SHOWN items, with their whole counts beside them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import grpc

from cronlog.commands.api.history_proofs import MAX_PROOF_JOBS, HistoryProofs
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc import convert
from cronlog.infra.grpc.channel_rpcs import answered
from cronlog.infra.grpc.error_status import abort
from cronlog.v1 import job_service_pb2 as pb
from cronlog.verification.findings import Check, Violation
from cronlog.verification.verifier import Verification
from cronlog.verification.what_if import WhatIf

# Items of each list an answer holds.
SHOWN = 100


def _at(value: datetime | None) -> dict[str, object]:
    stamp = convert.timestamp_out(value)
    return {} if stamp is None else {"fire_time": stamp}


def violation_out(violation: Violation) -> pb.HistoryViolation:
    return pb.HistoryViolation(
        check=str(violation.check), job_id=violation.job_id, run_id=violation.run_id or "",
        detail=violation.detail, **_at(violation.fire_time),  # type: ignore[arg-type]
        evidence=[pb.LogEvidence(event=e.event, version=e.version,
                                 at=convert.timestamp_out(e.at), run_id=e.run_id or "")
                  for e in violation.evidence])


def verification_out(result: Verification) -> pb.VerifyHistoryResponse:
    tally = result.tally
    counts = result.by_check()
    return pb.VerifyHistoryResponse(
        holds=result.holds,
        tally=pb.VerificationTally(
            jobs=tally.jobs, fire_times=tally.fire_times,
            missed_fire_times=tally.missed_fire_times, runs=tally.runs,
            manual_runs=tally.manual_runs, dependency_runs=tally.dependency_runs,
            attempts=tally.attempts, retries=tally.retries,
            unjudged_upstreams=tally.unjudged_upstreams),
        checks=[pb.CheckCount(check=str(c), violations=counts.get(str(c), 0)) for c in Check],
        violations=[violation_out(v) for v in result.violations[:SHOWN]],
        violations_total=len(result.violations))


def _stamps(values: Sequence[datetime]) -> list[object]:
    return [convert.timestamp_out(v) for v in values[:SHOWN]]


def what_if_out(result: WhatIf) -> pb.WhatIfResponse:
    added, removed = result.added, result.removed
    load = result.top_of_hour_load()
    busiest = sorted(load.items(), key=lambda item: (-abs(item[1]), item[0]))[:SHOWN]
    return pb.WhatIfResponse(
        current_count=len(result.current), proposed_count=len(result.proposed),
        truncated=result.truncated,
        added=_stamps(added), added_count=len(added),  # type: ignore[arg-type]
        removed=_stamps(removed), removed_count=len(removed),  # type: ignore[arg-type]
        late=[pb.WhatIfFireTime(fire_time=convert.timestamp_out(t),
                                late_by=convert.duration_out(d))
              for t, d in result.late[:SHOWN]], late_count=len(result.late),
        missed=[pb.WhatIfFireTime(fire_time=convert.timestamp_out(t), reason=why)
                for t, why in result.missed[:SHOWN]], missed_count=len(result.missed),
        overlapping=[pb.WhatIfFireTime(fire_time=convert.timestamp_out(t), reason=what)
                     for t, what in result.overlapping[:SHOWN]],
        overlapping_count=len(result.overlapping),
        dst_days=[pb.WhatIfDstDay(day=day.isoformat(), change=change,
                                  fire_times=_stamps(times))  # type: ignore[arg-type]
                  for day, change, times in result.dst_days[:SHOWN]],
        top_of_hour=[pb.WhatIfHourLoad(hour=convert.timestamp_out(t), change=n)
                     for t, n in busiest])


def _window(request: pb.VerifyHistoryRequest | pb.WhatIfRequest
            ) -> tuple[datetime, datetime | None]:
    if not request.HasField("since"):
        raise InvalidSpec("since", "is required: the start of the window")
    until = (convert.timestamp_in(request.until, "until") if request.HasField("until")
             else None)
    return convert.timestamp_in(request.since, "since"), until


class HistoryProofRpcs:
    """VerifyHistory and WhatIf of JobServiceServicer; `serve_proofs` gives them their api
    (without one they are UNAVAILABLE)."""

    _proofs: HistoryProofs | None = None

    def serve_proofs(self, proofs: HistoryProofs | None) -> None:
        self._proofs = proofs

    def _scope(self, context: grpc.ServicerContext, *, job_id: str | None = None,
               run_id: str | None = None, tenant: tuple[str, str] | None = None
               ) -> str | None:
        raise NotImplementedError  # JobServiceServicer's

    def _proof_api(self, context: grpc.ServicerContext) -> HistoryProofs:
        if self._proofs is None:
            abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot read the event log")
        return self._proofs

    @answered
    def VerifyHistory(self, request: pb.VerifyHistoryRequest,
                      context: grpc.ServicerContext) -> pb.VerifyHistoryResponse:
        caller = self._scope(context, tenant=("tenant", request.tenant))
        tenant = caller or request.tenant
        if not tenant:
            raise InvalidSpec("tenant", "the tenant whose jobs are proved is required")
        if len(request.job_ids) > MAX_PROOF_JOBS:
            raise InvalidSpec("job_ids", f"at most {MAX_PROOF_JOBS} jobs a call, not "
                                         f"{len(request.job_ids)}")
        for job_id in request.job_ids:
            self._scope(context, job_id=job_id)
        since, until = _window(request)
        settle = (convert.duration_in(request.settle, "settle")
                  if request.HasField("settle") else None)
        return verification_out(self._proof_api(context).verify(
            tenant, list(request.job_ids), since, until, settle))

    @answered
    def WhatIf(self, request: pb.WhatIfRequest,
               context: grpc.ServicerContext) -> pb.WhatIfResponse:
        caller = self._scope(context, job_id=request.job_id,
                             tenant=("spec.tenant", request.spec.tenant))
        if not request.HasField("spec"):
            raise InvalidSpec("spec", "the spec to replay the job's history under is required")
        if caller and not request.spec.tenant:
            request.spec.tenant = caller
        try:
            job_id = UUID(request.job_id)
        except ValueError:
            raise InvalidSpec("job_id", f"{request.job_id[:40]!r} is not a UUID") from None
        since, until = _window(request)
        return what_if_out(self._proof_api(context).what_if(
            job_id, convert.spec_in(request.spec), since, until))
