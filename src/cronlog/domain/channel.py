"""The Channel aggregate (issue 37): where a tenant's alerts are delivered, a webhook, a
Slack incoming webhook or e-mail recipients, versioned by its events like a calendar.

A channel lives on the partition of its id, which derives from the tenant and the name
(channel_id, in a namespace of its own, so a channel never shares an id, or a partition
key, with a calendar of the same name); its owner is its only writer, and no tenant can
name another's channel (invariant 10).

What a channel holds, and why:

- `kind`: webhook, slack or email (ChannelKind), fixed at creation.
- `target`: for webhook and slack, the URL deliveries are sent to; "" for email.
  An https URL of at most MAX_TARGET_CHARS ASCII characters (an IDN host in its xn--
  form), with a host name or IP literal and no credentials in it (a URL ends up in logs,
  replies and the console; a receiver that wants a token gets the signature instead).
  Plain http is accepted only for a loopback host (LOOPBACK_HOSTS: 127.0.0.1, ::1 and
  localhost, exactly) so that tests and a local stack can run a receiver without TLS;
  everywhere else a delivery and its signature would travel in clear. A slack target's
  host is hooks.slack.com, unless it is a loopback host (a test's stand-in for Slack).
  This is the URL's shape only: whether a delivery may go to the address a host resolves
  to (loopback included) is the egress fence's decision when it is sent
  (outbound/policy.py), as for the `http` handler.
- `recipients`: for email, 1 to MAX_RECIPIENTS addresses local@domain, each at most
  MAX_ADDRESS_CHARS characters, the domain of two or more DNS labels, no two the same
  (compared without case); () for webhook and slack. A simple check, not RFC 5322: no
  quoted local parts, comments or IP-literal domains. The SMTP server is the operator's.
- `description`: at most MAX_DESCRIPTION_CHARS characters.
- `is_default`: the channel receives the tenant's tenant-level alerts. A flag on each
  channel, not a tenant-wide choice: channels of one tenant live on different
  partitions, so no one owner could keep it unique; when several carry it, each
  receives them (at most MAX_CHANNELS_PER_TENANT).
- `secret_rotation`: no webhook signing secret is stored. The secret is derived where
  deliveries are signed, from an operator's key, the channel id and this number, which
  starts at 0 and which rotate_secret increments; so an event, a projection or a replay
  never holds one.
- `deleted`: a deleted channel is not found by update, rotation or delivery. Its id (its
  tenant and name) stays its own: creating the name again restores it (recreate), with the
  new settings and the next secret rotation, so that a deleted channel's secret is never
  handed out again.

The version counts every event (created, updated, secret rotated, deleted, restored): a rotation
is a change to the channel like an update, so an update expecting the version before it
is refused as stale.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID, uuid5

from eventsourcing.domain import event

from cronlog.domain.aggregate import CronlogAggregate
from cronlog.domain.bounds import CHANNEL_NAME_PATTERN
from cronlog.domain.errors import DomainError, InvalidSpec, StaleVersion
from cronlog.domain.limits import TenantLimitReached
from cronlog.domain.spec import TENANT_PATTERN

# A tenant's channels, deleted ones not counted. Deliveries of a tenant-level alert go to
# each default channel, so this also bounds the fan-out of one alert (invariant 12).
MAX_CHANNELS_PER_TENANT = 20

MAX_DESCRIPTION_CHARS = 500
MAX_TARGET_CHARS = 2048
MAX_RECIPIENTS = 10
MAX_ADDRESS_CHARS = 254
# RFC 5321's limit on the part before the @.
MAX_LOCAL_PART_CHARS = 64
MAX_HOST_CHARS = 253
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
SLACK_HOST = "hooks.slack.com"
# Fixed: changing it would change the id, the partition and the signing secret of every
# channel. Not the calendars' namespace, so that a channel's id is never a calendar's.
CHANNEL_NAMESPACE = UUID("88e3f879-1a9d-4b00-8873-8b37f348dbea")

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
# Dot-atoms only (RFC 5322 section 3.2.3): the characters an unquoted local part may hold.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_ADDRESS = re.compile(rf"(?P<local>{_ATOM}(?:\.{_ATOM})*)@{_LABEL}(?:\.{_LABEL})+")


class ChannelKind(StrEnum):
    """How a channel delivers: a signed HTTP request, a Slack message, an e-mail."""

    WEBHOOK = "webhook"
    SLACK = "slack"
    EMAIL = "email"


class ChannelExists(DomainError):
    """A channel of that name exists already for the tenant."""

    status = "ALREADY_EXISTS"


class ChannelNotFound(DomainError):
    """No channel of that name exists for the tenant, or it was deleted."""

    status = "NOT_FOUND"


class ChannelLimitReached(TenantLimitReached):
    """The tenant has as many channels as it may (MAX_CHANNELS_PER_TENANT)."""


def channel_id(tenant: str, name: str) -> UUID:
    return uuid5(CHANNEL_NAMESPACE, f"{tenant}/{name}")


def check_channel_count(tenant: str, existing_channels: int) -> None:
    """Refuses one more channel for a tenant that has `existing_channels` already (deleted
    ones not counted)."""
    if existing_channels >= MAX_CHANNELS_PER_TENANT:
        raise ChannelLimitReached(
            f"tenant {tenant!r} has {existing_channels} channels; its limit is "
            f"{MAX_CHANNELS_PER_TENANT}: delete a channel first")


def validate_tenant(tenant: str, field: str = "channel.tenant") -> str:
    if not TENANT_PATTERN.fullmatch(tenant):
        raise InvalidSpec(field, f"tenant {tenant[:64]!r} must match {TENANT_PATTERN.pattern}")
    return tenant


def validate_channel_name(name: str, field: str = "channel.name") -> str:
    if not name:
        raise InvalidSpec(field, "a channel name must not be empty")
    if not CHANNEL_NAME_PATTERN.fullmatch(name):
        raise InvalidSpec(field, f"channel name {name[:40]!r} must match "
                                 f"{CHANNEL_NAME_PATTERN.pattern}")
    return name


def validate_kind(kind: str, field: str = "channel.kind") -> ChannelKind:
    try:
        return ChannelKind(kind)
    except ValueError:
        kinds = ", ".join(k.value for k in ChannelKind)
        raise InvalidSpec(field, f"kind {kind[:40]!r} is not one of {kinds}") from None


def validate_channel_description(description: str,
                                 field: str = "channel.description") -> str:
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidSpec(field, f"at most {MAX_DESCRIPTION_CHARS} characters, got "
                                 f"{len(description)}")
    return description


def _valid_host(host: str) -> bool:
    """A DNS name of letters, digits and hyphens whose last label is not a number, or an
    IP address without a zone. A name ending in a number is no DNS name (no top-level
    domain is one) but an address some parsers read otherwise: 1.2.3 as 1.2.0.3."""
    if len(host) > MAX_HOST_CHARS or "%" in host:
        return False
    if _HOST_NAME.fullmatch(host) and not host.rsplit(".", 1)[-1].isdigit():
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def validate_url(kind: ChannelKind, url: str, field: str = "channel.target") -> str:
    """A webhook's or slack channel's URL (the module docstring says what is accepted).
    Its length is checked before anything else looks at it."""
    if not url:
        raise InvalidSpec(field, f"a {kind} channel needs a URL")
    if len(url) > MAX_TARGET_CHARS:
        raise InvalidSpec(field, f"at most {MAX_TARGET_CHARS} characters, got {len(url)}")
    if not url.isascii() or not url.isprintable() or " " in url:
        raise InvalidSpec(field, "a URL is printable ASCII without spaces (an IDN host "
                                 "in its xn-- form, other characters percent-encoded)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidSpec(field, f"not a usable URL: {exc}") from None
    if port == 0:
        raise InvalidSpec(field, "port 0 is not a port a delivery can reach")
    host = parts.hostname or ""
    if not host:
        raise InvalidSpec(field, "the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise InvalidSpec(field, "the URL must not carry credentials (user:password@); "
                                 "deliveries are signed instead")
    if not _valid_host(host):
        raise InvalidSpec(field, f"host {host[:64]!r} is not a host name or IP address")
    loopback = host in LOOPBACK_HOSTS
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise InvalidSpec(field, "the URL must be https (http only for 127.0.0.1, ::1 or "
                                 f"localhost), got scheme {parts.scheme or 'none'!r}")
    if kind is ChannelKind.SLACK and not loopback and host != SLACK_HOST:
        raise InvalidSpec(field, f"a slack channel's URL is a Slack incoming webhook on "
                                 f"{SLACK_HOST}, not on {host[:64]!r}")
    return url


def validate_recipients(recipients: Sequence[str],
                        field: str = "channel.recipients") -> tuple[str, ...]:
    """An email channel's addresses: at most MAX_RECIPIENTS iterations, each a length
    check then a linear match of at most MAX_ADDRESS_CHARS characters."""
    if isinstance(recipients, str):
        raise InvalidSpec(field, "a list of addresses, not one string")
    if not recipients:
        raise InvalidSpec(field, "an email channel needs at least one recipient")
    if len(recipients) > MAX_RECIPIENTS:
        raise InvalidSpec(field, f"at most {MAX_RECIPIENTS} recipients, got "
                                 f"{len(recipients)}")
    seen: set[str] = set()
    for index, address in enumerate(recipients):
        if len(address) > MAX_ADDRESS_CHARS:
            raise InvalidSpec(field, f"recipient {index}: at most {MAX_ADDRESS_CHARS} "
                                     f"characters, got {len(address)}")
        matched = _ADDRESS.fullmatch(address)
        if matched is None:
            raise InvalidSpec(field, f"recipient {index}: {address[:64]!r} is not an "
                                     "address local@domain.example")
        if len(matched.group("local")) > MAX_LOCAL_PART_CHARS:
            raise InvalidSpec(field, f"recipient {index}: at most {MAX_LOCAL_PART_CHARS} "
                                     "characters before the @")
        if address.lower() in seen:
            raise InvalidSpec(field, f"recipient {index}: {address[:64]!r} is named twice")
        seen.add(address.lower())
    return tuple(recipients)


def validate_destination(kind: ChannelKind, target: str,
                         recipients: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """The target and recipients a channel of that kind holds: a URL and no recipients,
    or recipients and no URL."""
    if kind is ChannelKind.EMAIL:
        if target:
            raise InvalidSpec("channel.target", "an email channel has recipients, not a "
                                                "URL")
        return "", validate_recipients(recipients)
    if recipients:
        raise InvalidSpec("channel.recipients", f"a {kind} channel has a URL, not "
                                                "recipients")
    return validate_url(kind, target), ()


class Channel(CronlogAggregate):
    tenant: str
    name: str
    kind: ChannelKind
    target: str
    recipients: tuple[str, ...]
    description: str
    is_default: bool
    secret_rotation: int
    deleted: bool

    @staticmethod
    def create_id(channel_id: UUID, **_: Any) -> UUID:
        return channel_id

    @event("ChannelCreated")
    def __init__(self, channel_id: UUID, tenant: str, name: str, kind: ChannelKind,
                 target: str, recipients: tuple[str, ...], description: str,
                 is_default: bool, request_id: str | None, timestamp: datetime) -> None:
        self.tenant = tenant
        self.name = name
        self.kind = kind
        self.target = target
        self.recipients = recipients
        self.description = description
        self.is_default = is_default
        self.secret_rotation = 0
        self.deleted = False

    @classmethod
    def create(cls, tenant: str, name: str, kind: str, target: str,
               recipients: Sequence[str], description: str, is_default: bool,
               request_id: str | None, at: datetime) -> Channel:
        """A new channel, at secret rotation 0. Whether one of that id exists already is
        its owner's to check: a live one is ChannelExists, a deleted one is recreated
        (recreate), never created again at rotation 0, which would sign with the secret
        the deleted channel was given."""
        validate_tenant(tenant)
        validate_channel_name(name)
        valid_kind = validate_kind(kind)
        target, valid_recipients = validate_destination(valid_kind, target, recipients)
        return cls(channel_id=channel_id(tenant, name), tenant=tenant, name=name,
                   kind=valid_kind, target=target, recipients=valid_recipients,
                   description=validate_channel_description(description),
                   is_default=is_default, request_id=request_id, timestamp=at)

    def _require_live(self) -> None:
        if self.deleted:
            raise ChannelNotFound(f"channel {self.name!r} was deleted")

    def update(self, target: str, recipients: Sequence[str], description: str,
               is_default: bool, request_id: str | None, at: datetime,
               expected_version: int = -1) -> None:
        """Replaces the target or recipients, the description and the default flag (the
        kind stays); expected_version -1 means any."""
        self._require_live()
        if expected_version != -1 and expected_version != self.version:
            raise StaleVersion(f"channel {self.name!r} is at version {self.version}, not "
                               f"{expected_version}")
        target, valid_recipients = validate_destination(self.kind, target, recipients)
        self._updated(tenant=self.tenant, name=self.name, target=target,
                      recipients=valid_recipients,
                      description=validate_channel_description(description),
                      is_default=is_default, request_id=request_id, timestamp=at)

    # The tenant and name again in each event, so that each says whose channel it changes.
    @event("ChannelUpdated")
    def _updated(self, tenant: str, name: str, target: str, recipients: tuple[str, ...],
                 description: str, is_default: bool, request_id: str | None,
                 timestamp: datetime) -> None:
        self.target = target
        self.recipients = recipients
        self.description = description
        self.is_default = is_default

    def rotate_secret(self, request_id: str | None, at: datetime) -> int:
        """Moves to the next signing secret; returns the new rotation. Any kind may
        rotate (only webhooks sign today; the number costs nothing elsewhere)."""
        self._require_live()
        self._secret_rotated(tenant=self.tenant, name=self.name,
                             secret_rotation=self.secret_rotation + 1,
                             request_id=request_id, timestamp=at)
        return self.secret_rotation

    @event("ChannelSecretRotated")
    def _secret_rotated(self, tenant: str, name: str, secret_rotation: int,
                        request_id: str | None, timestamp: datetime) -> None:
        self.secret_rotation = secret_rotation

    def delete(self, request_id: str | None, at: datetime) -> bool:
        """Deletes the channel; False, with no event, when it was deleted already."""
        if self.deleted:
            return False
        self._deleted(tenant=self.tenant, name=self.name, request_id=request_id,
                      timestamp=at)
        return True

    def recreate(self, kind: str, target: str, recipients: Sequence[str], description: str,
                 is_default: bool, request_id: str | None, at: datetime) -> None:
        """A deleted channel created again under its name: the new settings (any kind),
        live, at the next secret rotation. A live channel is ChannelExists."""
        if not self.deleted:
            raise ChannelExists(f"channel {self.name!r} already exists")
        valid_kind = validate_kind(kind)
        target, valid_recipients = validate_destination(valid_kind, target, recipients)
        self._restored(tenant=self.tenant, name=self.name, kind=valid_kind, target=target,
                       recipients=valid_recipients,
                       description=validate_channel_description(description),
                       is_default=is_default, secret_rotation=self.secret_rotation + 1,
                       request_id=request_id, timestamp=at)

    @event("ChannelRestored")
    def _restored(self, tenant: str, name: str, kind: ChannelKind, target: str,
                  recipients: tuple[str, ...], description: str, is_default: bool,
                  secret_rotation: int, request_id: str | None, timestamp: datetime) -> None:
        self.kind = kind
        self.target = target
        self.recipients = recipients
        self.description = description
        self.is_default = is_default
        self.secret_rotation = secret_rotation
        self.deleted = False

    @event("ChannelDeleted")
    def _deleted(self, tenant: str, name: str, request_id: str | None,
                 timestamp: datetime) -> None:
        self.deleted = True
        # No longer a destination for the tenant's alerts.
        self.is_default = False
