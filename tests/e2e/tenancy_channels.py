"""Tenancy of alert channels (issue 37), a test of tests/e2e/test_tenancy.py kept here
(that module is long): it runs there, on its service with two tenants' tokens, and reads
the tokens from it when it runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import cast

import grpc

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import rid


def test_channels_are_only_the_callers_tenants(stub: pb_grpc.JobServiceStub) -> None:
    """Another tenant can neither read, use, test nor change a tenant's alert channel (issue
    37): naming the tenant is PERMISSION_DENIED; naming the channel finds none of its own.
    More in tests/e2e/test_channels.py and tests/e2e/test_test_channel.py."""
    from tests.e2e.test_tenancy import ALPHA, A, B, code_of, rejection

    name = "hook-" + uuid.uuid4().hex[:8]
    created = stub.CreateChannel(pb.CreateChannelRequest(
        request_id=rid(), name=name, kind="webhook", url="https://hooks.example.com/a"),
        timeout=30, metadata=A)
    assert created.signing_secret.startswith("whsec_")
    # Both loops bind `call`, to calls of different answers.
    call: Callable[[], object]
    for call in (lambda: stub.CreateChannel(pb.CreateChannelRequest(
                     request_id=rid(), tenant=ALPHA, name="x", kind="email",
                     recipients=["a@b.example"]), timeout=30, metadata=B),
                 lambda: stub.ListChannels(pb.ListChannelsRequest(tenant=ALPHA),
                                           timeout=10, metadata=B),
                 lambda: stub.GetChannel(pb.GetChannelRequest(tenant=ALPHA, name=name),
                                         timeout=10, metadata=B),
                 lambda: stub.TestChannel(pb.TestChannelRequest(tenant=ALPHA, name=name),
                                          timeout=30, metadata=B)):
        assert code_of(call) == grpc.StatusCode.PERMISSION_DENIED
    for call in (lambda: stub.GetChannel(pb.GetChannelRequest(name=name), timeout=10,
                                         metadata=B),
                 lambda: stub.UpdateChannel(pb.UpdateChannelRequest(
                     request_id=rid(), name=name, url="https://evil.example/x"),
                     timeout=30, metadata=B),
                 lambda: stub.RotateChannelSecret(pb.RotateChannelSecretRequest(
                     request_id=rid(), name=name), timeout=30, metadata=B),
                 lambda: stub.DeleteChannel(pb.DeleteChannelRequest(
                     request_id=rid(), name=name), timeout=30, metadata=B),
                 lambda: stub.TestChannel(pb.TestChannelRequest(name=name), timeout=30,
                                          metadata=B)):
        error = rejection(call)
        assert error.code() == grpc.StatusCode.NOT_FOUND
        # grpc gives every failed call its details; the stubs say Optional.
        assert f"channel {name!r} not found" in cast(str, error.details())
    assert name not in [c.name for c in stub.ListChannels(
        pb.ListChannelsRequest(), timeout=10, metadata=B).channels]
    mine = stub.GetChannel(pb.GetChannelRequest(name=name), timeout=10, metadata=A).channel
    assert (mine.tenant, mine.version, mine.url, mine.secret_rotation) == (
        ALPHA, 1, "https://hooks.example.com/a", 0)
