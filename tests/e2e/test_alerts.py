"""Alerts to the job's owner end to end (issue 37, docs/alerts.md) over the real stack with the
notifier, and real receivers on loopback: a webhook receiver that verifies the Standard
Webhooks signature with the published library and answers 500 to the first request of each
delivery, and an SMTP server (aiosmtpd).

- A job failing past its attempts is one signed delivery per channel; the retry carries the
  same id; the e-mail carries its delivery's id; a success after it is `recovered`.
- Ten failures within the throttle's interval are one alert and one digest of nine.
- A tenant whose endpoint never answers does not hold another tenant's delivery.
- Every attempt is listed by ListAlertDeliveries for its tenant, and for no other.

The receivers are on 127.0.0.1, which the egress fence refuses unless the operator allows
it: this module's service allows it (CRONLOG_HTTP_ALLOW)."""

from __future__ import annotations

import email
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import rid
from tests.support.alert_receivers import (
    HttpReceiver,
    Reply,
    Request,
    SmtpRecorder,
    free_port,
    smtp_server,
)
from tests.support.polling import wait_for

pytestmark = pytest.mark.e2e
SMTP_PORT = free_port()
THROTTLE = timedelta(seconds=10)
SERVICE_ROLES = ("api", "scheduler", "worker", "projector", "notifier")
SERVICE_OVERRIDES = {
    "http_allow": ("127.0.0.1",), "alert_throttle": THROTTLE,
    "alert_retry_base": timedelta(milliseconds=500), "alert_http_timeout": timedelta(seconds=2),
    "smtp_host": "127.0.0.1", "smtp_port": SMTP_PORT, "smtp_from": "cronlog <alerts@example.com>"}
YEARLY = "0 0 1 1 *"  # fires only when triggered, within this test


class FirstRefused:
    """Answers 500 to the first request of each delivery (webhook-id), 204 to the others;
    keeps every request."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        with self.lock:
            self.seen[request.headers["webhook-id"]] += 1
            first = self.seen[request.headers["webhook-id"]] == 1
        return Reply(500 if first else 204)


@pytest.fixture(scope="module")
def mailbox() -> Iterator[SmtpRecorder]:
    recorder = SmtpRecorder()
    with smtp_server(recorder, port=SMTP_PORT):
        yield recorder


def tenant() -> str:
    return "al-" + uuid.uuid4().hex[:8]


def webhook(stub: pb_grpc.JobServiceStub, owner: str, name: str, url: str,
            default: bool = False) -> str:
    """A webhook channel; its secret."""
    created = stub.CreateChannel(pb.CreateChannelRequest(
        request_id=rid(), tenant=owner, name=name, kind="webhook", url=url,
        is_default=default), timeout=30)
    return str(created.signing_secret)


def failing_job(stub: pb_grpc.JobServiceStub, owner: str, name: str,
                notify: pb.NotifyRule | None = None) -> str:
    spec = pb.JobSpec(name=name, tenant=owner, handler="fail", payload=b'{"times": 1000}',
                      cron=YEARLY, time_zone="UTC", retry_policy=pb.RetryPolicy(max_attempts=2))
    spec.retry_policy.initial_backoff.FromMilliseconds(100)
    if notify is not None:
        spec.notify.CopyFrom(notify)
    return str(stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec),
                              timeout=30).job.job_id)


def trigger(stub: pb_grpc.JobServiceStub, job_id: str) -> str:
    return str(stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job_id),
                               timeout=30).run.run_id)


def bodies(receiver: HttpReceiver, secret: str) -> list[tuple[str, dict[str, Any]]]:
    """Each request as (webhook-id, body), after checking its signature with the library."""
    out = []
    for request in list(receiver.requests):
        body = Webhook(secret).verify(request.body, request.headers)
        out.append((request.headers["webhook-id"], body))
    return out


def test_a_dead_letter_is_one_signed_delivery_per_channel_then_recovered(
        stub: pb_grpc.JobServiceStub, mailbox: SmtpRecorder) -> None:
    owner = tenant()
    with HttpReceiver(FirstRefused()).running() as receiver:
        secret = webhook(stub, owner, "hook", receiver.url)
        stub.CreateChannel(pb.CreateChannelRequest(
            request_id=rid(), tenant=owner, name="mail", kind="email",
            recipients=["ops@example.com"]), timeout=30)
        job_id = failing_job(stub, owner, "nightly", pb.NotifyRule(
            channels=["hook", "mail"], on=["dead_lettered", "recovered"]))
        run_id = trigger(stub, job_id)

        def dead_letter_retried() -> list[tuple[str, dict[str, Any]]] | None:
            seen = bodies(receiver, secret)
            return seen if len(seen) >= 2 else None

        (first_id, first), (second_id, second) = wait_for(
            dead_letter_retried, 60, "the dead letter delivered, refused once, then retried")
        assert first_id == second_id and first == second  # the retry: the same id and body
        assert first["type"] == "run.dead_lettered"
        assert first["data"]["run_id"] == run_id and first["data"]["job_name"] == "nightly"
        assert first["data"]["attempt"] == 2
        mail = wait_for(lambda: list(mailbox.mails), 30, "the dead letter's e-mail")
        [message] = [m for m in map(email.message_from_bytes, (x.content for x in mail))
                     if "dead-lettered" in m["Subject"]]
        assert "nightly" in message["Subject"] and message["To"] == "ops@example.com"
        assert message["X-Cronlog-Delivery-Id"] and message["X-Cronlog-Delivery-Id"] != first_id
        assert message["Message-ID"].startswith(f"<{message['X-Cronlog-Delivery-Id']}.")

        # The job fixed: its next run succeeds, and the owner hears it has recovered.
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10).job
        job.spec.handler = "echo"
        stub.UpdateJob(pb.UpdateJobRequest(request_id=rid(), job_id=job_id, spec=job.spec),
                       timeout=30)
        recovered_run = trigger(stub, job_id)

        def recovered() -> list[dict[str, Any]] | None:
            seen = [b for _, b in bodies(receiver, secret) if b["type"] == "run.recovered"]
            return seen if len(seen) >= 2 else None

        body, again = wait_for(recovered, 60, "the recovery delivered, refused once, retried")
        assert body == again and body["data"]["run_id"] == recovered_run
        assert len([b for _, b in bodies(receiver, secret)
                    if b["type"] == "run.dead_lettered"]) == 2  # sent once, retried once

    def listed() -> list[Any] | None:
        page = stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
            tenant=owner, job_id=job_id, channel="hook"), timeout=10).attempts
        return list(page) if len(page) >= 4 else None

    attempts = wait_for(listed, 60, "the attempts in the history")
    outcomes = sorted((a.kind, a.attempt, a.outcome, a.status_code) for a in attempts)
    assert outcomes == [("dead_lettered", 1, "retrying", 500), ("dead_lettered", 2,
                                                                   "delivered", 204),
                        ("recovered", 1, "retrying", 500), ("recovered", 2, "delivered", 204)]
    assert not stub.ListAlertDeliveries(pb.ListAlertDeliveriesRequest(
        tenant=tenant(), job_id=job_id), timeout=10).attempts


def test_ten_failures_within_the_interval_are_one_alert_and_one_digest(
        stub: pb_grpc.JobServiceStub) -> None:
    owner = tenant()
    with HttpReceiver(lambda _: Reply(204)).running() as receiver:
        secret = webhook(stub, owner, "hook", receiver.url)
        job_id = failing_job(stub, owner, "flaky", pb.NotifyRule(channels=["hook"],
                                                                 on=["failed"]))
        job = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10).job
        job.spec.retry_policy.max_attempts = 1
        stub.UpdateJob(pb.UpdateJobRequest(request_id=rid(), job_id=job_id, spec=job.spec),
                       timeout=30)
        began = time.monotonic()
        for _ in range(10):
            trigger(stub, job_id)
        if time.monotonic() - began > THROTTLE.total_seconds() / 2:
            pytest.skip("triggering took half the throttle's interval here: the ten failures "
                        "may not fall in one interval")

        def digest() -> list[dict[str, Any]] | None:
            seen = [b for _, b in bodies(receiver, secret)]
            return seen if any(b["data"]["digest_count"] for b in seen) else None

        seen = wait_for(digest, 90, "the digest of the failures held back")
        assert [b["type"] for b in seen] == ["run.failed", "run.failed"]
        assert [b["data"]["digest_count"] for b in seen] == [0, 9]
        assert seen[1]["data"]["message"].startswith("9 more failures since")


# Measured: it bounds how long the other tenant's delivery takes (make test runs it at
# normal priority, docs/development.md).
@pytest.mark.measured
def test_a_tenants_dead_endpoint_does_not_hold_another_tenants_delivery(
        stub: pb_grpc.JobServiceStub) -> None:
    slow, quick = tenant(), tenant()
    hanging = HttpReceiver(lambda _: Reply(204, delay_seconds=60))
    with hanging.running(), HttpReceiver(lambda _: Reply(204)).running() as taking:
        for n in range(5):
            webhook(stub, slow, f"dead-{n}", hanging.url + f"/{n}", default=True)
        quick_secret = webhook(stub, quick, "hook", taking.url, default=True)
        slow_jobs = [failing_job(stub, slow, f"job-{n}") for n in range(5)]
        quick_job = failing_job(stub, quick, "job")
        for job_id in slow_jobs:
            trigger(stub, job_id)
        wait_for(lambda: len(hanging.requests) >= 4, 60,
                 "the slow tenant's deliveries hanging at its endpoints")
        triggered = time.monotonic()
        run_id = trigger(stub, quick_job)

        def delivered() -> dict[str, Any] | None:
            return next((b for _, b in bodies(taking, quick_secret)
                         if b["data"]["run_id"] == run_id), None)

        wait_for(delivered, 30, "the other tenant's dead letter delivered")
        # Its run failed twice (100 ms apart) and was delivered while the slow tenant's
        # endpoints held their deliveries for a minute each.
        assert time.monotonic() - triggered < 20
        assert all(json.loads(r.body)["data"]["tenant"] == slow for r in hanging.requests)
