"""CronlogClient: the api's gRPC service as typed methods. It owns the channel (when made by
`connect`) and the stub, sends the bearer token, gives every call a deadline, and raises
ApiError, never grpc.RpcError."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import grpc
from google.protobuf.message import Message

from cronlog.client.errors import api_error
from cronlog.client.paging import Page, every_item
from cronlog.client.run_waiting import wait_for_run
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc

Request = TypeVar("Request", bound=Message)
Response = TypeVar("Response", bound=Message)
Metadata = tuple[tuple[str, str | bytes], ...]


@dataclass(frozen=True)
class Retries:
    """How often a call the api did not take (UNAVAILABLE) is made again: `attempts` in
    all, `backoff` seconds before the second, doubling after."""

    attempts: int = 3
    backoff: float = 0.2


@dataclass(frozen=True)
class Timeouts:
    """Seconds each kind of call may take: a read, a change (which waits for the owner's
    decision), and a batch (CreateJobs, BackfillJob)."""

    read: float = 10.0
    write: float = 30.0
    batch: float = 60.0


def channel_to(address: str, ca_file: str | None = None) -> grpc.Channel:
    """TLS to the api when a CA file is named (its certificate, or the CA that signed it),
    else plaintext. An unreadable CA file raises OSError."""
    if ca_file:
        ca = Path(ca_file).read_bytes()
        return grpc.secure_channel(address, grpc.ssl_channel_credentials(ca))
    return grpc.insecure_channel(address)


def connect(address: str, *, token: str | None = None, ca_file: str | None = None,
            timeouts: Timeouts = Timeouts(), retries: Retries = Retries()) -> CronlogClient:
    """A client with a channel of its own, closed by `close()` or leaving a `with` block.
    No call is made until the first method: an address nobody answers on fails then."""
    return CronlogClient(channel_to(address, ca_file), token=token, timeouts=timeouts,
                         owns_channel=True, retries=retries)


def _request_id(given: str | None) -> str:
    # A new one for a new change; pass the same id again to retry a change safely (the api
    # answers a repeated id with the first outcome).
    return given or str(uuid.uuid4())


class CronlogClient:
    """One api connection. `with_options` gives a client on the same channel with another
    token or other timeouts (the console's per-user calls)."""

    def __init__(self, channel: grpc.Channel | None = None, *, token: str | None = None,
                 timeouts: Timeouts = Timeouts(), owns_channel: bool = False,
                 stub: pb_grpc.JobServiceStub | None = None,
                 retries: Retries = Retries()) -> None:
        """Calls over channel, or through stub when given (a test's fake, or a stub over
        a channel with interceptors); owns_channel: `close()` closes the channel."""
        if stub is None:
            if channel is None:
                raise TypeError("CronlogClient needs a channel or a stub")
            stub = pb_grpc.JobServiceStub(channel)
        self._channel = channel
        self._stub = stub
        self._metadata: Metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeouts = timeouts
        self.retries = retries
        self._owns_channel = owns_channel

    def with_options(self, *, token: str | None,
                     timeouts: Timeouts | None = None) -> CronlogClient:
        """The same channel and stub, with this token (None: none) and these timeouts (None:
        this client's); closing it leaves the channel open."""
        return CronlogClient(self._channel, stub=self._stub, token=token,
                             timeouts=self.timeouts if timeouts is None else timeouts,
                             retries=self.retries)

    def close(self) -> None:
        if self._owns_channel and self._channel is not None:
            self._channel.close()

    def __enter__(self) -> CronlogClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def _call(self, rpc: grpc.UnaryUnaryMultiCallable[Request, Response], request: Request,
              timeout: float) -> Response:
        """The call, made again while the api is UNAVAILABLE (not reached, or restarting),
        at most `retries.attempts` times in all. The same request goes again, with its
        request id: a change the api had already taken is answered with its first outcome,
        never made twice."""
        attempt = 1
        while True:
            try:
                return rpc(request, timeout=timeout, metadata=self._metadata)
            except grpc.RpcError as exc:
                error = api_error(exc)
            if error.code != grpc.StatusCode.UNAVAILABLE or attempt >= self.retries.attempts:
                raise error
            time.sleep(self.retries.backoff * 2 ** (attempt - 1))
            attempt += 1

    # --- jobs -------------------------------------------------------------------------
    def create_job(self, spec: pb.JobSpec, *, request_id: str | None = None) -> pb.Job:
        return self.create_job_answer(spec, request_id=request_id).job

    def create_job_answer(self, spec: pb.JobSpec, *,
                          request_id: str | None = None) -> pb.CreateJobResponse:
        """The job and the api's warnings (e.g. no live worker offers its handler)."""
        return self._call(self._stub.CreateJob, pb.CreateJobRequest(
            request_id=_request_id(request_id), spec=spec), self.timeouts.write)

    def create_jobs(self, items: Iterable[pb.CreateJobRequest]
                    ) -> Sequence[pb.CreateJobsResult]:
        """One CreateJobs call (the api takes up to 1,000 items and 3 MiB): a result per
        item, in order, each the job made or found, or that item's error."""
        return self._call(self._stub.CreateJobs, pb.CreateJobsRequest(items=items),
                          self.timeouts.batch).results

    def get_job(self, job_id: str) -> pb.Job:
        return self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id),
                          self.timeouts.read).job

    def list_jobs(self, query: pb.ListJobsRequest) -> Page[pb.Job]:
        """One page: the query's filters, page_size and page_token."""
        answer = self._call(self._stub.ListJobs, query, self.timeouts.read)
        return Page(tuple(answer.jobs), answer.next_page_token)

    def all_jobs(self, query: pb.ListJobsRequest) -> Iterator[pb.Job]:
        """Every job the query finds, from its page_token on, a page per call."""
        return every_item(lambda token: self.list_jobs(_at_page(query, token)), query.page_token)

    def update_job(self, job_id: str, spec: pb.JobSpec, *, expected_version: int,
                   request_id: str | None = None) -> pb.Job:
        """The job's whole new spec; refused (FAILED_PRECONDITION) unless the job is at
        expected_version (0: whatever its version)."""
        return self.update_job_answer(job_id, spec, expected_version=expected_version,
                                      request_id=request_id).job

    def update_job_answer(self, job_id: str, spec: pb.JobSpec, *, expected_version: int,
                          request_id: str | None = None) -> pb.UpdateJobResponse:
        """As update_job, with the api's warnings."""
        return self._call(self._stub.UpdateJob, pb.UpdateJobRequest(
            request_id=_request_id(request_id), job_id=job_id,
            expected_version=expected_version, spec=spec), self.timeouts.write)

    def pause_job(self, job_id: str, *, request_id: str | None = None) -> pb.Job:
        return self._call(self._stub.PauseJob, pb.PauseJobRequest(
            request_id=_request_id(request_id), job_id=job_id), self.timeouts.write).job

    def resume_job(self, job_id: str, *, request_id: str | None = None) -> pb.Job:
        return self._call(self._stub.ResumeJob, pb.ResumeJobRequest(
            request_id=_request_id(request_id), job_id=job_id), self.timeouts.write).job

    def delete_job(self, job_id: str, *, request_id: str | None = None) -> pb.Job:
        return self._call(self._stub.DeleteJob, pb.DeleteJobRequest(
            request_id=_request_id(request_id), job_id=job_id), self.timeouts.write).job

    def restore_job(self, job_id: str, version: int, *, skip_missed: bool = False,
                    request_id: str | None = None) -> pb.RestoreJobResponse:
        """The job with the spec it had at `version`, back if deleted or completed; with
        skip_missed its fire times since it stopped are not run (docs/lifecycle.md)."""
        return self._call(self._stub.RestoreJob, pb.RestoreJobRequest(
            request_id=_request_id(request_id), job_id=job_id, version=version,
            skip_missed=skip_missed), self.timeouts.write)

    def trigger_job(self, job_id: str, *, cascade: bool = False,
                    request_id: str | None = None) -> pb.Run:
        """A run now; with cascade the job's dependents follow it."""
        return self._call(self._stub.TriggerJob, pb.TriggerJobRequest(
            request_id=_request_id(request_id), job_id=job_id, cascade=cascade),
            self.timeouts.write).run

    def backfill_job(self, job_id: str, after: datetime, until: datetime, *,
                     cascade: bool = False, request_id: str | None = None) -> list[str]:
        """The ids of the runs of the job's fire times in (after, until]."""
        request = pb.BackfillJobRequest(request_id=_request_id(request_id), job_id=job_id,
                                        cascade=cascade)
        getattr(request, "from").FromDatetime(after)
        request.until.FromDatetime(until)
        return list(self._call(self._stub.BackfillJob, request, self.timeouts.batch).run_ids)

    # --- runs -------------------------------------------------------------------------
    def get_run(self, run_id: str) -> pb.Run:
        return self._call(self._stub.GetRun, pb.GetRunRequest(run_id=run_id),
                          self.timeouts.read).run

    def wait_for_run(self, run_id: str, timeout: float = 60.0, poll: float = 0.5) -> pb.Run:
        """The run once its status is one it never leaves (succeeded, dead-lettered,
        cancelled, missed, skipped), asking every `poll` seconds; RunWaitTimeout after
        `timeout` seconds (at most an hour)."""
        return wait_for_run(self.get_run, run_id, timeout, poll)

    def list_runs(self, query: pb.ListRunsRequest) -> Page[pb.Run]:
        """One page, newest first."""
        answer = self._call(self._stub.ListRuns, query, self.timeouts.read)
        return Page(tuple(answer.runs), answer.next_page_token)

    def all_runs(self, query: pb.ListRunsRequest) -> Iterator[pb.Run]:
        return every_item(lambda token: self.list_runs(_at_page(query, token)), query.page_token)

    def cancel_run(self, run_id: str, *, request_id: str | None = None) -> pb.Run:
        return self._call(self._stub.CancelRun, pb.CancelRunRequest(
            request_id=_request_id(request_id), run_id=run_id), self.timeouts.write).run

    def redrive_run(self, run_id: str, *, request_id: str | None = None) -> pb.Run:
        """A dead-lettered run's new series of attempts, under its own run id."""
        return self._call(self._stub.RedriveRun, pb.RedriveRunRequest(
            request_id=_request_id(request_id), run_id=run_id), self.timeouts.write).run

    def redrive_dead_letters(self, since: datetime, until: datetime | None = None, *,
                             tenant: str = "", job_id: str = "", limit: int = 0,
                             request_id: str | None = None) -> pb.RedriveDeadLettersResponse:
        """The tenant's dead letters fired in [since, until) (until: now), of one job when
        given, re-driven as redrive_run would, at most `limit` (0: 100) of them; `more` says
        whether to call again (with a new request id). tenant "" is the token's tenant."""
        request = pb.RedriveDeadLettersRequest(request_id=_request_id(request_id),
                                               tenant=tenant, job_id=job_id, limit=limit)
        request.since.FromDatetime(since)
        if until is not None:
            request.until.FromDatetime(until)
        return self._call(self._stub.RedriveDeadLetters, request, self.timeouts.batch)

    def preview_schedule(self, request: pb.PreviewScheduleRequest
                         ) -> pb.PreviewScheduleResponse:
        """Fire times of a cron expression or an interval, with their explanation."""
        return self._call(self._stub.PreviewSchedule, request, self.timeouts.read)

    # --- proofs from the log (docs/verify.md) ------------------------------------------
    def verify_history(self, since: datetime, until: datetime | None = None, *,
                       tenant: str = "", job_ids: Sequence[str] = ()
                       ) -> pb.VerifyHistoryResponse:
        """What `cronlog verify` proves, for the tenant's jobs (or those named) fired in
        [since, until) (until: now; at most 31 days). tenant "" is the token's tenant."""
        request = pb.VerifyHistoryRequest(tenant=tenant, job_ids=list(job_ids))
        request.since.FromDatetime(since)
        if until is not None:
            request.until.FromDatetime(until)
        return self._call(self._stub.VerifyHistory, request, self.timeouts.batch)

    def what_if(self, job_id: str, spec: pb.JobSpec, since: datetime,
                until: datetime | None = None) -> pb.WhatIfResponse:
        """The job's history in [since, until) replayed under `spec` (whole, as update_job
        takes it): what it would have changed. Nothing is written."""
        request = pb.WhatIfRequest(job_id=job_id, spec=spec)
        request.since.FromDatetime(since)
        if until is not None:
            request.until.FromDatetime(until)
        return self._call(self._stub.WhatIf, request, self.timeouts.batch)

    # --- calendars --------------------------------------------------------------------
    def create_calendar(self, tenant: str, name: str, *, description: str = "",
                        exclusions: Iterable[str] = (),
                        request_id: str | None = None) -> pb.Calendar:
        """tenant "" is the token's tenant."""
        return self._call(self._stub.CreateCalendar, pb.CreateCalendarRequest(
            request_id=_request_id(request_id), tenant=tenant, name=name,
            description=description, exclusions=exclusions), self.timeouts.write).calendar

    def get_calendar(self, tenant: str, name: str) -> pb.Calendar:
        return self._call(self._stub.GetCalendar, pb.GetCalendarRequest(
            tenant=tenant, name=name), self.timeouts.read).calendar

    def update_calendar(self, tenant: str, name: str, *, description: str,
                        exclusions: Iterable[str], expected_version: int,
                        request_id: str | None = None) -> pb.Calendar:
        """The calendar's whole new description and excluded days, at expected_version (0:
        whatever its version); the jobs on it follow."""
        return self._call(self._stub.UpdateCalendar, pb.UpdateCalendarRequest(
            request_id=_request_id(request_id), tenant=tenant, name=name,
            description=description, exclusions=exclusions,
            expected_version=expected_version), self.timeouts.write).calendar

    def list_calendars(self, tenant: str = "", page_size: int = 100,
                       page_token: str = "") -> Page[pb.Calendar]:
        answer = self._call(self._stub.ListCalendars, pb.ListCalendarsRequest(
            tenant=tenant, page_size=page_size, page_token=page_token), self.timeouts.read)
        return Page(tuple(answer.calendars), answer.next_page_token)

    def all_calendars(self, tenant: str = "", page_size: int = 100) -> Iterator[pb.Calendar]:
        return every_item(lambda token: self.list_calendars(tenant, page_size, token))

    # --- alert channels (issue 37) -----------------------------------------------------
    def create_channel(self, tenant: str, name: str, *, kind: str, url: str = "",
                       recipients: Iterable[str] = (), description: str = "",
                       is_default: bool = False, request_id: str | None = None
                       ) -> pb.CreateChannelResponse:
        """tenant "" is the token's tenant. The response holds a webhook channel's signing
        secret, which no later call shows again (a retry with the same request_id does)."""
        return self._call(self._stub.CreateChannel, pb.CreateChannelRequest(
            request_id=_request_id(request_id), tenant=tenant, name=name, kind=kind, url=url,
            recipients=recipients, description=description, is_default=is_default),
            self.timeouts.write)

    def update_channel(self, tenant: str, name: str, *, url: str = "",
                       recipients: Iterable[str] = (), description: str = "",
                       is_default: bool = False, expected_version: int = 0,
                       request_id: str | None = None) -> pb.Channel:
        """The channel's whole new URL or recipients, description and default flag, at
        expected_version (0: whatever its version)."""
        return self._call(self._stub.UpdateChannel, pb.UpdateChannelRequest(
            request_id=_request_id(request_id), tenant=tenant, name=name, url=url,
            recipients=recipients, description=description, is_default=is_default,
            expected_version=expected_version), self.timeouts.write).channel

    def delete_channel(self, tenant: str, name: str,
                       request_id: str | None = None) -> pb.Channel:
        return self._call(self._stub.DeleteChannel, pb.DeleteChannelRequest(
            request_id=_request_id(request_id), tenant=tenant, name=name),
            self.timeouts.write).channel

    def rotate_channel_secret(self, tenant: str, name: str, request_id: str | None = None
                              ) -> pb.RotateChannelSecretResponse:
        """The channel's next signing secret, in the response only."""
        return self._call(self._stub.RotateChannelSecret, pb.RotateChannelSecretRequest(
            request_id=_request_id(request_id), tenant=tenant, name=name),
            self.timeouts.write)

    def get_channel(self, tenant: str, name: str) -> pb.Channel:
        return self._call(self._stub.GetChannel, pb.GetChannelRequest(
            tenant=tenant, name=name), self.timeouts.read).channel

    def list_channels(self, tenant: str = "", page_size: int = 100,
                      page_token: str = "") -> Page[pb.Channel]:
        answer = self._call(self._stub.ListChannels, pb.ListChannelsRequest(
            tenant=tenant, page_size=page_size, page_token=page_token), self.timeouts.read)
        return Page(tuple(answer.channels), answer.next_page_token)

    def all_channels(self, tenant: str = "", page_size: int = 100) -> Iterator[pb.Channel]:
        return every_item(lambda token: self.list_channels(tenant, page_size, token))

    def test_channel(self, tenant: str, name: str) -> pb.TestChannelResponse:
        """Sends one test alert to the channel now and answers what the attempt came to
        (`delivered` false is an answer, not an error). Made once, even when the api is
        UNAVAILABLE: a call made again could be a second test alert. The deadline is a
        batch's, beyond the sender's own bounds (an e-mail's 30 s)."""
        try:
            return self._stub.TestChannel(pb.TestChannelRequest(tenant=tenant, name=name),
                                          timeout=self.timeouts.batch,
                                          metadata=self._metadata)
        except grpc.RpcError as exc:
            raise api_error(exc) from None

    # --- workers ----------------------------------------------------------------------
    def list_workers(self, queue: str = "") -> list[pb.Worker]:
        """The live workers (of one queue, when given), as the caller may see them."""
        return list(self._call(self._stub.ListWorkers, pb.ListWorkersRequest(queue=queue),
                               self.timeouts.read).workers)

    # --- alert deliveries -------------------------------------------------------------
    def list_alert_deliveries(self, tenant: str = "", job_id: str = "", channel: str = "",
                              outcome: str = "", page_size: int = 50,
                              page_token: str = "") -> Page[pb.AlertDeliveryAttempt]:
        """A page of the tenant's delivery attempts, newest first: of one job, to one
        channel (by name), with one outcome (delivered, retrying, failed) when given."""
        answer = self._call(self._stub.ListAlertDeliveries, pb.ListAlertDeliveriesRequest(
            tenant=tenant, job_id=job_id, channel=channel, outcome=outcome,
            page_size=page_size, page_token=page_token), self.timeouts.read)
        return Page(tuple(answer.attempts), answer.next_page_token)


QueryT = TypeVar("QueryT", pb.ListJobsRequest, pb.ListRunsRequest)


def _at_page(query: QueryT, page_token: str) -> QueryT:
    at = type(query)()
    at.CopyFrom(query)
    at.page_token = page_token
    return at
