"""The api's side of alert channels (issue 37, docs/alerts.md "Channels"): validate, send
CreateChannel / UpdateChannel / DeleteChannel / RotateChannelSecret to the channel's
owner, read channels back; and a webhook channel's signing secret, derived, never stored.

Every call is scoped to one tenant: a channel's id derives from (tenant, name) and every
read names the tenant, so no request reaches another tenant's channel (invariant 10);
another tenant's channel is as missing as one never created.

The secret: derive_channel_secret(operator key, channel id, rotation), the operator's key
read at start from CRONLOG_ALERT_SIGNING_KEY_FILE. It is in the answer to the create and
to each rotation (a retry of the same request id gets it again: the first outcome), never
in GetChannel or ListChannels, never in an event, a row or a log line. Creating a deleted
channel's name again restores it at its next rotation, so its old secret is not handed out
again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from cronlog.commands import messages
from cronlog.commands.api.calendar_api import require_tenant
from cronlog.commands.api.job_api import NotVisibleYet, require_ok, require_request_id
from cronlog.commands.api.ports import ChannelReader, ChannelView
from cronlog.commands.messages import ChannelCommand, CommandBus
from cronlog.domain.channel import (
    MAX_CHANNELS_PER_TENANT,
    MAX_RECIPIENTS,
    ChannelKind,
    ChannelLimitReached,
    ChannelNotFound,
    validate_channel_description,
    validate_channel_name,
    validate_kind,
    validate_recipients,
    validate_url,
)
from cronlog.domain.errors import DomainError, InvalidSpec
from cronlog.notifications.signing import derive_channel_secret
from cronlog.ports import Clock

SIGNING_KEY_SETTING = "CRONLOG_ALERT_SIGNING_KEY_FILE"
# UpdateChannel's expected_version in the command when the client accepts any version.
ANY_VERSION = -1
# A page of ListChannels: at most this many rows of at most about 27 KB.
MAX_PAGE = 100


class SigningKeyMissing(DomainError):
    """This deployment has no operator key: a webhook channel's secret cannot be derived."""

    status = "FAILED_PRECONDITION"
    field = "kind"


@dataclass(frozen=True)
class ChannelAnswer:
    """A channel and, in the answer to a create or a rotation of a webhook, its secret."""

    channel: ChannelView
    secret: str = ""


def destination(kind: ChannelKind, target: str,
                recipients: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """A channel's URL or its addresses, bounded in number before any is looked at, each
    error naming the request's field."""
    if kind is ChannelKind.EMAIL:
        if target:
            raise InvalidSpec("target", "an email channel has recipients, not a URL")
        if isinstance(recipients, str) or len(recipients) > MAX_RECIPIENTS:
            raise InvalidSpec("recipients", f"at most {MAX_RECIPIENTS} recipients")
        return "", validate_recipients(list(recipients), "recipients")
    if recipients:
        raise InvalidSpec("recipients", f"a {kind} channel has a URL, not recipients")
    return validate_url(kind, target, "target"), ()


@dataclass
class ChannelApi:
    bus: CommandBus
    channels: ChannelReader
    clock: Clock
    # The operator's key (CRONLOG_ALERT_SIGNING_KEY_FILE); b"": none.
    signing_key: bytes = b""
    reply_timeout: float = 15.0
    # How long to wait for the channels table to show what the owner just committed.
    read_your_write_timeout: float = 5.0
    max_per_tenant: int = MAX_CHANNELS_PER_TENANT

    def create(self, request_id: str, tenant: str, name: str, kind: str, target: str,
               recipients: Sequence[str], description: str,
               is_default: bool) -> ChannelAnswer:
        request_id = require_request_id(request_id)
        self._named(tenant, name)
        valid_kind = validate_kind(kind, "kind")
        target, valid_recipients = destination(valid_kind, target, recipients)
        validate_channel_description(description, "description")
        if valid_kind is ChannelKind.WEBHOOK:
            self._require_key()
        existing = self.channels.channel(tenant, name)
        if existing is None or existing.deleted:
            # A live one is the owner's to answer: the first outcome to a retry,
            # ALREADY_EXISTS to anyone else; a deleted one is restored, and counts again.
            # Two creates racing at the limit may both pass.
            count = self.channels.count_channels(tenant)
            if count >= self.max_per_tenant:
                raise ChannelLimitReached(
                    f"tenant {tenant!r} has {count} channels; its limit is "
                    f"{self.max_per_tenant}: delete a channel first")
        return self._send(messages.CreateChannel(
            request_id=request_id, tenant=tenant, name=name, at=self.clock.now(),
            kind=valid_kind.value, target=target, recipients=valid_recipients,
            description=description, is_default=is_default), secret=True)

    def update(self, request_id: str, tenant: str, name: str, target: str,
               recipients: Sequence[str], description: str, is_default: bool,
               expected_version: int) -> ChannelAnswer:
        request_id = require_request_id(request_id)
        if expected_version < 0:
            raise InvalidSpec("expected_version", "must not be negative")
        current = self._live(tenant, name)
        target, valid_recipients = destination(ChannelKind(current.kind), target, recipients)
        validate_channel_description(description, "description")
        return self._send(messages.UpdateChannel(
            request_id=request_id, tenant=tenant, name=name, at=self.clock.now(),
            target=target, recipients=valid_recipients, description=description,
            is_default=is_default, expected_version=expected_version or ANY_VERSION))

    def delete(self, request_id: str, tenant: str, name: str) -> ChannelAnswer:
        request_id = require_request_id(request_id)
        self._named(tenant, name)
        return self._send(messages.DeleteChannel(
            request_id=request_id, tenant=tenant, name=name, at=self.clock.now()))

    def rotate_secret(self, request_id: str, tenant: str, name: str) -> ChannelAnswer:
        request_id = require_request_id(request_id)
        if self._live(tenant, name).kind == ChannelKind.WEBHOOK:
            self._require_key()
        return self._send(messages.RotateChannelSecret(
            request_id=request_id, tenant=tenant, name=name, at=self.clock.now()),
            secret=True)

    def get(self, tenant: str, name: str) -> ChannelView:
        return self._live(tenant, name)

    def list(self, tenant: str, page_size: int,
             page_token: str | None) -> tuple[list[ChannelView], str | None]:
        return self.channels.channels(require_tenant(tenant), min(max(page_size, 1), MAX_PAGE),
                                      page_token)

    def secret_of(self, channel: ChannelView) -> str:
        """A webhook channel's current signing secret; "" for the other kinds."""
        if channel.kind != ChannelKind.WEBHOOK:
            return ""
        self._require_key()
        return derive_channel_secret(self.signing_key, channel.channel_id,
                                     channel.secret_rotation)

    # -- helpers -----------------------------------------------------------------------
    @staticmethod
    def _named(tenant: str, name: str) -> None:
        require_tenant(tenant)
        validate_channel_name(name, "name")

    def _live(self, tenant: str, name: str) -> ChannelView:
        self._named(tenant, name)
        found = self.channels.channel(tenant, name)
        if found is None or found.deleted:
            raise ChannelNotFound(f"channel {name!r} not found")
        return found

    def _require_key(self) -> None:
        if not self.signing_key:
            raise SigningKeyMissing(
                f"this deployment has no alert signing key: a webhook channel's secret "
                f"cannot be derived; the operator sets {SIGNING_KEY_SETTING} "
                "(docs/alerts.md, \"Channels\")")

    def _send(self, command: ChannelCommand, secret: bool = False) -> ChannelAnswer:
        reply = self.bus.send(command, self.reply_timeout)
        require_ok(reply)
        view = self._wait_for(command.tenant, command.name,
                              int(reply.get("job_version") or 1))
        return ChannelAnswer(view, self.secret_of(view) if secret and not view.deleted
                             else "")

    def _wait_for(self, tenant: str, name: str, version: int) -> ChannelView:
        deadline = time.monotonic() + self.read_your_write_timeout
        while True:
            found = self.channels.channel(tenant, name)
            if found is not None and found.version >= version:
                return found
            if time.monotonic() >= deadline:
                if found is not None:
                    return found
                raise NotVisibleYet(f"channel {name!r} was accepted but is not visible yet; "
                                    "send the same request again (same request id) to read it")
            time.sleep(0.02)
