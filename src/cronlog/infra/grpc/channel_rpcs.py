"""The alert channel RPCs (issue 37, docs/alerts.md "Channels"): requests to ChannelApi,
channels back, as a mixin of JobServiceServicer (whose module is full).

Each RPC first scopes the call to the caller's tenant through the servicer's own `_scope`
(a request naming another tenant is PERMISSION_DENIED; another tenant's channel is as
missing as one never created), then answers every application error with its status, as
the servicer's RPCs do. The signing secret is in CreateChannel's and RotateChannelSecret's
responses only, and never logged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import grpc

from cronlog.commands.api.channel_api import ChannelAnswer, ChannelApi
from cronlog.commands.api.channel_testing import ChannelTester
from cronlog.commands.api.ports import ChannelView
from cronlog.domain.channel import MAX_RECIPIENTS
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc.convert import timestamp_out
from cronlog.infra.grpc.error_status import abort, status_of
from cronlog.v1 import job_service_pb2 as pb

# A page is at most 100 channels of at most about 27 KB: well within a gRPC message.
DEFAULT_PAGE = 100
MAX_PAGE = 100
MAX_PAGE_TOKEN_CHARS = 512
DEADLINE_MARGIN = 0.25
MOST_COMMAND_WAIT = 120.0

Request = TypeVar("Request")
Response = TypeVar("Response")
Method = Callable[[Any, Request, grpc.ServicerContext], Response]


def answered(method: Method[Request, Response]) -> Method[Request, Response]:
    """The application's errors answered with their status (error_status)."""

    @functools.wraps(method)
    def answer(self: Any, request: Request, context: grpc.ServicerContext) -> Response:
        try:
            return method(self, request, context)
        except Exception as exc:
            status = status_of(exc)
            if status is None:
                raise
            abort(context, status.code, status.message, status.field)

    return answer


def channel_out(view: ChannelView) -> pb.Channel:
    return pb.Channel(name=view.name, kind=view.kind, url=view.target,
                      recipients=list(view.recipients), description=view.description,
                      is_default=view.is_default, secret_rotation=view.secret_rotation,
                      version=view.version, tenant=view.tenant,
                      channel_id=str(view.channel_id),
                      created_at=timestamp_out(view.created_at),
                      updated_at=timestamp_out(view.updated_at))


def _recipients(values: Sequence[str]) -> list[str]:
    """Bounded in number before the domain looks at any."""
    if len(values) > MAX_RECIPIENTS:
        raise InvalidSpec("recipients", f"at most {MAX_RECIPIENTS} recipients, got "
                                        f"{len(values)}")
    return list(values)


def _page_size(value: int) -> int:
    if value < 0:
        raise InvalidSpec("page_size", "must not be negative")
    return min(value or DEFAULT_PAGE, MAX_PAGE)


def _page_token(value: str) -> str | None:
    if len(value) > MAX_PAGE_TOKEN_CHARS:
        raise InvalidSpec("page_token", f"is not a token this service gave out "
                                        f"(over {MAX_PAGE_TOKEN_CHARS} characters)")
    return value or None


def tenant_of(caller: str | None, requested: str) -> str:
    """The caller's tenant when authenticated (the request's, if any, was checked to be the
    same); the request's own in open mode, where it is required."""
    if caller is not None:
        return caller
    if not requested:
        raise InvalidSpec("tenant", "a tenant is required (a channel belongs to one tenant)")
    return requested


def _expected(value: int) -> int:
    # 0 and -1 both mean any version (the command carries -1).
    return 0 if value == -1 else value


class ChannelRpcs:
    """The channel methods of JobServiceServicer; `serve_channels` gives them their api
    (without one they are UNAVAILABLE)."""

    _channels: ChannelApi | None = None
    _channel_tester: ChannelTester | None = None

    def serve_channels(self, api: ChannelApi | None) -> None:
        self._channels = api

    def serve_channel_tests(self, tester: ChannelTester | None) -> None:
        self._channel_tester = tester

    def _scope(self, context: grpc.ServicerContext, *, job_id: str | None = None,
               run_id: str | None = None, tenant: tuple[str, str] | None = None
               ) -> str | None:
        raise NotImplementedError  # JobServiceServicer's

    def _channel_api(self, context: grpc.ServicerContext) -> ChannelApi:
        if self._channels is None:
            abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot serve channels")
        api = self._channels
        remaining = context.time_remaining()
        if remaining is None:
            return api
        budget = min(max(remaining - DEADLINE_MARGIN, 0.05), MOST_COMMAND_WAIT)
        return replace(api, reply_timeout=budget,
                       read_your_write_timeout=min(api.read_your_write_timeout, budget))

    def _caller(self, context: grpc.ServicerContext, requested: str) -> tuple[ChannelApi, str]:
        caller = self._scope(context, tenant=("tenant", requested))
        return self._channel_api(context), tenant_of(caller, requested)

    @answered
    def CreateChannel(self, request: pb.CreateChannelRequest,
                      context: grpc.ServicerContext) -> pb.CreateChannelResponse:
        api, tenant = self._caller(context, request.tenant)
        answer: ChannelAnswer = api.create(
            request.request_id, tenant, request.name, request.kind, request.url,
            _recipients(request.recipients), request.description, request.is_default)
        return pb.CreateChannelResponse(channel=channel_out(answer.channel),
                                        signing_secret=answer.secret)

    @answered
    def UpdateChannel(self, request: pb.UpdateChannelRequest,
                      context: grpc.ServicerContext) -> pb.UpdateChannelResponse:
        api, tenant = self._caller(context, request.tenant)
        answer = api.update(request.request_id, tenant, request.name, request.url,
                            _recipients(request.recipients), request.description,
                            request.is_default, _expected(request.expected_version))
        return pb.UpdateChannelResponse(channel=channel_out(answer.channel))

    @answered
    def DeleteChannel(self, request: pb.DeleteChannelRequest,
                      context: grpc.ServicerContext) -> pb.DeleteChannelResponse:
        api, tenant = self._caller(context, request.tenant)
        answer = api.delete(request.request_id, tenant, request.name)
        return pb.DeleteChannelResponse(channel=channel_out(answer.channel))

    @answered
    def GetChannel(self, request: pb.GetChannelRequest,
                   context: grpc.ServicerContext) -> pb.GetChannelResponse:
        api, tenant = self._caller(context, request.tenant)
        return pb.GetChannelResponse(channel=channel_out(api.get(tenant, request.name)))

    @answered
    def ListChannels(self, request: pb.ListChannelsRequest,
                     context: grpc.ServicerContext) -> pb.ListChannelsResponse:
        api, tenant = self._caller(context, request.tenant)
        views, token = api.list(tenant, _page_size(request.page_size),
                                _page_token(request.page_token))
        return pb.ListChannelsResponse(channels=[channel_out(v) for v in views],
                                       next_page_token=token or "")

    @answered
    def RotateChannelSecret(self, request: pb.RotateChannelSecretRequest,
                            context: grpc.ServicerContext) -> pb.RotateChannelSecretResponse:
        api, tenant = self._caller(context, request.tenant)
        answer = api.rotate_secret(request.request_id, tenant, request.name)
        return pb.RotateChannelSecretResponse(channel=channel_out(answer.channel),
                                              signing_secret=answer.secret)

    @answered
    def TestChannel(self, request: pb.TestChannelRequest,
                    context: grpc.ServicerContext) -> pb.TestChannelResponse:
        # The send is bounded by the sender's timeouts, not by the call's deadline: a
        # caller that gives up early loses the answer, never a half-sent request.
        caller = self._scope(context, tenant=("tenant", request.tenant))
        if self._channel_tester is None:
            abort(context, grpc.StatusCode.UNAVAILABLE, "this api cannot test channels")
        tested = self._channel_tester.test(tenant_of(caller, request.tenant), request.name)
        result = tested.result
        return pb.TestChannelResponse(delivered=result.ok, status_code=result.status_code,
                                      latency_ms=result.latency_ms, error=result.error,
                                      delivery_id=str(tested.delivery_id))
