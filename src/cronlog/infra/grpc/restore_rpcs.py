"""RestoreJob at the gRPC edge (issue 38, docs/lifecycle.md "Restoring a job"), as a mixin
of JobServiceServicer (whose module is full).

Scoped first, as every tenant RPC: another tenant's job is NOT_FOUND, deleted or not, before
anything is read or sent. The api reads the spec the job had at the version asked for and
checks it as a create's; the owner gives it back as a new version (JobRestored)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import grpc

from cronlog.commands.api.job_api import JobApi
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc.channel_rpcs import answered
from cronlog.infra.grpc.worker_rpcs import FleetView, job_warnings
from cronlog.v1 import job_service_pb2 as pb


class JobRestoreRpcs:
    """RestoreJob of JobServiceServicer."""

    _fleet: FleetView | None  # JobServiceServicer's

    def _scope(self, context: grpc.ServicerContext, *, job_id: str | None = None,
               run_id: str | None = None, tenant: tuple[str, str] | None = None
               ) -> str | None:
        raise NotImplementedError  # JobServiceServicer's

    def _api_for(self, context: grpc.ServicerContext) -> JobApi:
        raise NotImplementedError  # JobServiceServicer's

    def _job(self, row: Any) -> pb.Job:
        raise NotImplementedError  # JobServiceServicer's

    @answered
    def RestoreJob(self, request: pb.RestoreJobRequest,
                   context: grpc.ServicerContext) -> pb.RestoreJobResponse:
        self._scope(context, job_id=request.job_id)
        try:
            job_id = UUID(request.job_id)
        except ValueError:
            raise InvalidSpec("job_id", f"{request.job_id!r} is not a UUID") from None
        row = self._api_for(context).restore_job(request.request_id, job_id, request.version,
                                                 skip_missed=request.skip_missed)
        job = self._job(row)
        return pb.RestoreJobResponse(job=job, warnings=job_warnings(self._fleet, job))
