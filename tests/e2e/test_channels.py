"""Alert channels end to end (issue 37, docs/alerts.md "Channels") over the real stack:
create, get, list, update, rotate and delete; a webhook's signing secret shown by the
create and each rotation only, derived from the stack's key and verified by the published
Standard Webhooks library; bad input refused naming the field and writing nothing; a
tenant's count bounded; another tenant's channel as missing as none; and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

import grpc
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronlog.domain.channel import MAX_CHANNELS_PER_TENANT, channel_id
from cronlog.infra.config import Settings
from cronlog.notifications.signing import derive_channel_secret, sign
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, rid

pytestmark = pytest.mark.e2e
HOOK = "https://hooks.example.com/cronlog"


def tenant() -> str:
    return "ch-" + uuid.uuid4().hex[:8]


def rejection(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


def field_of(error: grpc.RpcError) -> str | None:
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("tuple[tuple[str, str], ...]", error.trailing_metadata() or ())
    return dict(trailing).get("cronlog-field")


def code(error: grpc.RpcError) -> grpc.StatusCode:
    return error.code()


def create(stub: pb_grpc.JobServiceStub, owner: str, name: str = "ops",
           **fields: Any) -> pb.CreateChannelResponse:
    values: dict[str, Any] = {"kind": "webhook", "url": HOOK, **fields}
    return stub.CreateChannel(pb.CreateChannelRequest(
        request_id=fields.pop("request_id", rid()), tenant=owner, name=name,
        **{k: v for k, v in values.items() if k != "request_id"}), timeout=30)


def verified(secret: str) -> bool:
    headers = sign(secret, "msg_" + uuid.uuid4().hex, int(time.time()), b'{"alert": 1}')
    try:
        # verify answers the parsed JSON, typed Any.
        payload: object = Webhook(secret).verify(b'{"alert": 1}', headers)
        return payload == {"alert": 1}
    except WebhookVerificationError:
        return False


def test_a_webhook_channels_life_and_its_secret_shown_once(
        service: RunningService, stub: pb_grpc.JobServiceStub) -> None:
    owner = tenant()
    settings = service.settings
    assert isinstance(settings, Settings) and settings.alert_signing_key
    created = create(stub, owner, description="on call", is_default=True)
    channel = created.channel
    assert (channel.name, channel.kind, channel.url, channel.version, channel.tenant) == (
        "ops", "webhook", HOOK, 1, owner)
    assert channel.is_default and channel.secret_rotation == 0
    assert channel.channel_id == str(channel_id(owner, "ops"))
    secret = created.signing_secret
    assert secret == derive_channel_secret(settings.alert_signing_key,
                                           channel_id(owner, "ops"), 0)
    assert verified(secret)
    # Reads never show it.
    got = stub.GetChannel(pb.GetChannelRequest(tenant=owner, name="ops"), timeout=10)
    assert secret not in str(got) and got.channel.description == "on call"
    listed = stub.ListChannels(pb.ListChannelsRequest(tenant=owner), timeout=10)
    assert [c.name for c in listed.channels] == ["ops"] and secret not in str(listed)
    # Another create of the name is ALREADY_EXISTS (a retry: the next test).
    exists = rejection(lambda: create(stub, owner))
    assert code(exists) == grpc.StatusCode.ALREADY_EXISTS and field_of(exists) == "name"

    rotated = stub.RotateChannelSecret(pb.RotateChannelSecretRequest(
        request_id=rid(), tenant=owner, name="ops"), timeout=30)
    assert rotated.channel.secret_rotation == 1 and rotated.channel.version == 2
    new_secret = rotated.signing_secret
    assert new_secret not in ("", secret) and verified(new_secret)
    # What the new secret signs, the old one does not verify.
    headers = sign(new_secret, "msg_1", int(time.time()), b"{}")
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b"{}", headers)

    stale = rejection(lambda: stub.UpdateChannel(pb.UpdateChannelRequest(
        request_id=rid(), tenant=owner, name="ops", url=HOOK, expected_version=1),
        timeout=30))
    assert code(stale) == grpc.StatusCode.FAILED_PRECONDITION
    assert field_of(stale) == "expected_version"
    updated = stub.UpdateChannel(pb.UpdateChannelRequest(
        request_id=rid(), tenant=owner, name="ops", url=HOOK + "/v2", expected_version=2),
        timeout=30).channel
    assert (updated.url, updated.version, updated.is_default, updated.secret_rotation) == (
        HOOK + "/v2", 3, False, 1)

    deleted = stub.DeleteChannel(pb.DeleteChannelRequest(
        request_id=rid(), tenant=owner, name="ops"), timeout=30).channel
    assert deleted.version == 4
    for call in (lambda: stub.GetChannel(pb.GetChannelRequest(tenant=owner, name="ops"),
                                         timeout=10),
                 lambda: stub.RotateChannelSecret(pb.RotateChannelSecretRequest(
                     request_id=rid(), tenant=owner, name="ops"), timeout=30)):
        assert code(rejection(call)) == grpc.StatusCode.NOT_FOUND
    assert list(stub.ListChannels(pb.ListChannelsRequest(tenant=owner),
                                  timeout=10).channels) == []
    # Created again, it is restored at its next rotation: a secret it never had.
    restored = create(stub, owner, kind="email", url="", recipients=["ops@example.com"])
    assert (restored.channel.kind, restored.channel.version) == ("email", 5)
    assert restored.channel.secret_rotation == 2 and restored.signing_secret == ""
    rewebhooked = stub.DeleteChannel(pb.DeleteChannelRequest(
        request_id=rid(), tenant=owner, name="ops"), timeout=30)
    assert rewebhooked.channel.version == 6
    third = create(stub, owner)
    assert third.channel.secret_rotation == 3
    assert third.signing_secret not in (secret, new_secret) and verified(third.signing_secret)


def test_a_retried_create_gets_its_first_outcome_and_the_same_secret(
        stub: pb_grpc.JobServiceStub) -> None:
    owner, request_id = tenant(), rid()
    first = create(stub, owner, request_id=request_id)
    again = create(stub, owner, request_id=request_id)
    assert again.channel.version == 1 and again.signing_secret == first.signing_secret


def test_email_and_slack_channels_hold_no_secret(stub: pb_grpc.JobServiceStub) -> None:
    owner = tenant()
    mail = create(stub, owner, "mail", kind="email", url="",
                  recipients=["ops@example.com", "dev@example.com"])
    assert list(mail.channel.recipients) == ["ops@example.com", "dev@example.com"]
    assert mail.signing_secret == "" and mail.channel.url == ""
    slack = create(stub, owner, "chat", kind="slack",
                   url="https://hooks.slack.com/services/T0/B0/x")
    assert slack.signing_secret == ""
    page = stub.ListChannels(pb.ListChannelsRequest(tenant=owner, page_size=1), timeout=10)
    assert [c.name for c in page.channels] == ["chat"] and page.next_page_token
    rest = stub.ListChannels(pb.ListChannelsRequest(tenant=owner, page_size=1,
                                                    page_token=page.next_page_token),
                             timeout=10)
    assert [c.name for c in rest.channels] == ["mail"] and not rest.next_page_token


@pytest.mark.parametrize(("fields", "field_name"), [
    ({"kind": "pager"}, "kind"),
    ({"url": "http://hooks.example.com/x"}, "target"),
    ({"url": "https://user:pw@hooks.example.com/x"}, "target"),
    ({"url": "https://hooks.example.com/" + "x" * 2100}, "target"),
    ({"kind": "slack", "url": "https://example.com/x"}, "target"),
    ({"kind": "email", "url": "", "recipients": ["not an address"]}, "recipients"),
    ({"kind": "email", "url": "", "recipients": [f"a{i}@b.example" for i in range(11)]},
     "recipients"),
    ({"recipients": ["a@b.example"]}, "recipients"),
    ({"description": "d" * 501}, "description"),
    ({"name": "no/slashes"}, "name"),
])
def test_bad_input_is_refused_naming_the_field_and_writes_nothing(
        stub: pb_grpc.JobServiceStub, fields: dict[str, Any], field_name: str) -> None:
    owner = tenant()
    name = fields.pop("name", "ops")
    error = rejection(lambda: create(stub, owner, name, **fields))
    assert code(error) == grpc.StatusCode.INVALID_ARGUMENT and field_of(error) == field_name
    assert list(stub.ListChannels(pb.ListChannelsRequest(tenant=owner),
                                  timeout=10).channels) == []


def test_a_tenant_has_at_most_its_channels_and_a_delete_frees_a_place(
        stub: pb_grpc.JobServiceStub) -> None:
    owner = tenant()
    for n in range(MAX_CHANNELS_PER_TENANT):
        create(stub, owner, f"c{n:02d}", kind="email", url="", recipients=["a@b.example"])
    full = rejection(lambda: create(stub, owner, "one-more"))
    assert code(full) == grpc.StatusCode.RESOURCE_EXHAUSTED
    # grpc gives every failed call its details; the stubs say Optional.
    assert str(MAX_CHANNELS_PER_TENANT) in cast(str, full.details())
    # Another tenant has its own count.
    create(stub, tenant())
    stub.DeleteChannel(pb.DeleteChannelRequest(request_id=rid(), tenant=owner, name="c00"),
                       timeout=30)
    assert create(stub, owner, "one-more").channel.version == 1


def test_another_tenants_channel_is_as_missing_as_none(stub: pb_grpc.JobServiceStub) -> None:
    owner, other = tenant(), tenant()
    create(stub, owner)
    for call in (lambda: stub.GetChannel(pb.GetChannelRequest(tenant=other, name="ops"),
                                         timeout=10),
                 lambda: stub.UpdateChannel(pb.UpdateChannelRequest(
                     request_id=rid(), tenant=other, name="ops", url=HOOK), timeout=30),
                 lambda: stub.RotateChannelSecret(pb.RotateChannelSecretRequest(
                     request_id=rid(), tenant=other, name="ops"), timeout=30),
                 lambda: stub.DeleteChannel(pb.DeleteChannelRequest(
                     request_id=rid(), tenant=other, name="ops"), timeout=30)):
        error = rejection(call)
        assert code(error) == grpc.StatusCode.NOT_FOUND
        assert "channel 'ops' not found" in cast(str, error.details())
    mine = stub.GetChannel(pb.GetChannelRequest(tenant=owner, name="ops"), timeout=10)
    assert mine.channel.version == 1 and mine.channel.secret_rotation == 0


def test_a_jobs_notify_rule_names_its_own_tenants_channels(
        stub: pb_grpc.JobServiceStub) -> None:
    owner, other = tenant(), tenant()
    create(stub, owner, "ops")
    create(stub, other, "pager")

    def job_spec(*channels: str, on: tuple[str, ...] = ()) -> pb.JobSpec:
        return pb.JobSpec(name="nightly", tenant=owner, handler="echo", cron="0 2 * * *",
                          notify=pb.NotifyRule(channels=list(channels), on=list(on)))

    for channels, field_name in [(("ops", "pager"), "spec.notify.channels[1]"),
                                 (("nope",), "spec.notify.channels[0]")]:
        error = rejection(lambda c=channels: stub.CreateJob(  # type: ignore[misc]
            pb.CreateJobRequest(request_id=rid(), spec=job_spec(*c)), timeout=30))
        assert code(error) == grpc.StatusCode.INVALID_ARGUMENT
        assert field_of(error) == field_name
        assert "not found" in cast(str, error.details())
    assert not stub.ListJobs(pb.ListJobsRequest(tenant=owner), timeout=10).jobs
    job = stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=job_spec(
        "ops", on=("started_late", "dead_lettered"))), timeout=30).job
    assert list(job.spec.notify.channels) == ["ops"]
    assert list(job.spec.notify.on) == ["dead_lettered", "started_late"]
    assert job.spec.notify.late_after.ToTimedelta().total_seconds() == 60
    read = stub.GetJob(pb.GetJobRequest(job_id=job.job_id), timeout=10).job
    assert read.spec.notify == job.spec.notify
    changed = pb.JobSpec()
    changed.CopyFrom(read.spec)
    changed.notify.on[:] = ["exploded"]
    error = rejection(lambda: stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job.job_id, spec=changed), timeout=30))
    assert field_of(error) == "spec.notify.on"
    changed.notify.on[:] = ["failed"]
    updated = stub.UpdateJob(pb.UpdateJobRequest(
        request_id=rid(), job_id=job.job_id, spec=changed), timeout=30).job
    assert list(updated.spec.notify.on) == ["failed"]


def cli(service: RunningService, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "cronlog.infra.entrypoints.cli", "--address", service.address,
         *args], capture_output=True, text=True, timeout=90, env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout if "table" in args else json.loads(done.stdout)


def test_the_cli_manages_channels(service: RunningService) -> None:
    owner = tenant()
    created = cli(service, "channels", "create", "ops", "--tenant", owner, "--kind",
                  "webhook", "--url", HOOK, "--default", "--description", "on call")
    assert created["channel"]["is_default"] is True
    assert created["signing_secret"].startswith("whsec_")
    cli(service, "channels", "create", "mail", "--tenant", owner, "--kind", "email",
        "--recipient", "a@b.example", "--recipient", "c@d.example")
    shown = cli(service, "channels", "get", "ops", "--tenant", owner, "-o", "table")
    assert "ops" in shown and "webhook" in shown and "whsec_" not in shown
    updated = cli(service, "channels", "update", "ops", "--tenant", owner, "--no-default")
    assert updated["channel"].get("is_default", False) is False
    assert updated["channel"]["description"] == "on call"
    rotated = cli(service, "channels", "rotate-secret", "ops", "--tenant", owner, "-o",
                  "table")
    assert "shown this once" in rotated and "whsec_" in rotated
    listed = cli(service, "channels", "list", "--tenant", owner)
    assert [c["name"] for c in listed["channels"]] == ["mail", "ops"]
    cli(service, "channels", "delete", "mail", "--tenant", owner)
    assert [c["name"] for c in cli(service, "channels", "list", "--tenant",
                                   owner)["channels"]] == ["ops"]
