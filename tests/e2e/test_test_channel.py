"""TestChannel end to end (issue 37, docs/alerts.md "Testing a channel") over the real stack,
with real receivers on loopback: the test alert reaches a webhook receiver that verifies the
Standard Webhooks signature with the published library and the secret CreateChannel
returned (204: delivered); a receiver answering 500 is not delivered, once, not retried;
another tenant testing the channel is NOT_FOUND and the receiver gets nothing; and the CLI
(exit status 1 when not delivered).

The receivers are on 127.0.0.1, which the egress fence refuses unless the operator allows
it: this module's service allows it (CRONLOG_HTTP_ALLOW), the shared one does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any, cast

import grpc
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid
from tests.e2e.service_groups import WORK
from tests.support.alert_receivers import HttpReceiver, Reply, Request

pytestmark = pytest.mark.e2e
# Webhooks to loopback allowed (channels need their partition's owner; nothing here runs
# a job).
SERVICE = WORK


class Verifying:
    """Verifies each request with the channel's secret (401 when it does not verify), then
    answers `status`; keeps what verified."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.secret = ""
        self.verified: list[tuple[dict[str, str], Any]] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        try:
            alert = Webhook(self.secret).verify(request.body, request.headers)
        except WebhookVerificationError:
            return Reply(401, b"bad signature")
        with self.lock:
            self.verified.append((request.headers, alert))
        return Reply(self.status)


@pytest.fixture
def taking() -> Iterator[tuple[HttpReceiver, Verifying]]:
    verifying = Verifying(204)
    with HttpReceiver(verifying).running() as receiver:
        yield receiver, verifying


@pytest.fixture
def failing() -> Iterator[tuple[HttpReceiver, Verifying]]:
    verifying = Verifying(500)
    with HttpReceiver(verifying).running() as receiver:
        yield receiver, verifying


def tenant() -> str:
    return "tc-" + uuid.uuid4().hex[:8]


def webhook(stub: pb_grpc.JobServiceStub, name: str, receiver: HttpReceiver,
            verifying: Verifying, owner: str = "") -> str:
    """A webhook channel to the receiver (of a new tenant unless one is given), whose
    secret the receiver verifies with; the tenant."""
    owner = owner or tenant()
    created = stub.CreateChannel(pb.CreateChannelRequest(
        request_id=rid(), tenant=owner, name=name, kind="webhook",
        url=f"{receiver.url}/cronlog"), timeout=30)
    verifying.secret = created.signing_secret
    return owner


def send_test(stub: pb_grpc.JobServiceStub, owner: str, name: str) -> pb.TestChannelResponse:
    return stub.TestChannel(
        pb.TestChannelRequest(tenant=owner, name=name), timeout=60)


def test_a_test_alert_reaches_the_receiver_signed_and_delivered(
        stub: pb_grpc.JobServiceStub, taking: tuple[HttpReceiver, Verifying]) -> None:
    receiver, verifying = taking
    owner = webhook(stub, "ops", receiver, verifying)
    answer = send_test(stub, owner, "ops")
    assert answer.delivered and answer.status_code == 204 and answer.error == ""
    assert answer.latency_ms >= 0
    assert len(receiver.requests) == 1 and len(verifying.verified) == 1
    headers, alert = verifying.verified[0]
    assert headers["webhook-id"] == answer.delivery_id
    assert alert["type"] == "channel.test"
    assert alert["data"]["kind"] == "channel_test" and alert["data"]["tenant"] == owner
    assert alert["data"]["message"] == "a test alert from cronlog for channel ops"
    # Each test is an alert of its own: a new id, so a receiver that drops retries keeps it.
    again = send_test(stub, owner, "ops")
    assert again.delivered and again.delivery_id != answer.delivery_id


def test_a_receiver_that_fails_is_told_once_and_not_retried(
        stub: pb_grpc.JobServiceStub, failing: tuple[HttpReceiver, Verifying]) -> None:
    receiver, verifying = failing
    owner = webhook(stub, "flaky", receiver, verifying)
    answer = send_test(stub, owner, "flaky")
    assert not answer.delivered and answer.status_code == 500
    assert "500" in answer.error and answer.delivery_id
    assert len(verifying.verified) == 1, "signed as the notifier signs, sent once"


def test_another_tenant_cannot_test_a_channel_and_nothing_is_sent(
        stub: pb_grpc.JobServiceStub, taking: tuple[HttpReceiver, Verifying]) -> None:
    receiver, verifying = taking
    owner, other = webhook(stub, "ops", receiver, verifying), tenant()
    for who, name in ((other, "ops"), (owner, "nope")):
        with pytest.raises(grpc.RpcError) as refused:
            send_test(stub, who, name)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        assert refused.value.details() == f"channel {name!r} not found"
    stub.DeleteChannel(pb.DeleteChannelRequest(request_id=rid(), tenant=owner, name="ops"),
                       timeout=30)
    with pytest.raises(grpc.RpcError) as deleted:
        send_test(stub, owner, "ops")
    assert deleted.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as bad:
        send_test(stub, owner, "not a name")
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("tuple[tuple[str, str], ...]", bad.value.trailing_metadata())
    assert dict(trailing)["cronlog-field"] == "name"
    assert receiver.requests == []


def cli(service: RunningService, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "--address", service.address,
         *args], capture_output=True, text=True, timeout=90, env=dict(os.environ))


def test_the_cli_tests_a_channel(service: RunningService, stub: pb_grpc.JobServiceStub,
                                 taking: tuple[HttpReceiver, Verifying],
                                 failing: tuple[HttpReceiver, Verifying]) -> None:
    owner = webhook(stub, "ops", *taking)
    webhook(stub, "flaky", *failing, owner=owner)
    done = cli(service, "channels", "test", "ops", "--tenant", owner)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["delivered"] is True and answer["status_code"] == 204
    assert answer["delivery_id"] == taking[1].verified[0][0]["webhook-id"]
    done = cli(service, "-o", "table", "channels", "test", "flaky", "--tenant", owner)
    assert done.returncode == 1, done.stdout + done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split()[:3] == ["DELIVERED", "STATUS", "LATENCY"]
    assert row.split()[:2] == ["no", "500"]
    done = cli(service, "channels", "test", "ops", "--tenant", tenant())
    assert done.returncode == 1 and "NOT_FOUND" in done.stderr
