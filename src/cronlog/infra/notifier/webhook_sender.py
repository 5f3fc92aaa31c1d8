"""Webhook channels: the alert's JSON body (rendering.webhook_body), signed per the Standard
Webhooks specification (signing.sign), POSTed through the egress fence (http_delivery.py).

Every attempt of a delivery carries the same `webhook-id`, the delivery's id, so a receiver
that dedupes by it sees a retry as one delivery; `webhook-timestamp` is this attempt's
`now`, and `webhook-signature` holds one signature per secret the channel still has (the
newest first), so a receiver holding the old or the new secret accepts it during a
rotation. The body is the same bytes on every attempt."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from cronlog.domain.channel import ChannelKind
from cronlog.infra.notifier.http_delivery import HttpDelivery
from cronlog.notifications.model import ChannelTarget, Delivery, DeliveryResult
from cronlog.notifications.outcomes import failed, unsendable
from cronlog.notifications.rendering import webhook_body
from cronlog.notifications.signing import sign


def webhook_id(delivery_id: UUID) -> str:
    """The `webhook-id` of a delivery: its id's canonical text, 36 characters of hex digits
    and hyphens, which signing.MSG_ID_PATTERN admits."""
    return str(delivery_id)


def unix_seconds(now: datetime) -> int:
    """`webhook-timestamp`: whole Unix seconds of a time with a zone."""
    if now.tzinfo is None:
        raise ValueError("now: a time with a zone (UTC), not a naive datetime")
    return int(now.timestamp())


class WebhookSender:
    """An AlertSender for webhook channels."""

    kind = ChannelKind.WEBHOOK

    def __init__(self, http: HttpDelivery) -> None:
        self._http = http

    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        refusal = unsendable(delivery, channel, self.kind)
        if refusal is not None:
            return failed(refusal, 0, False)
        if not channel.signing_secrets:
            return failed("the webhook channel has no signing secret", 0, False)
        body = webhook_body(delivery.alert)
        try:
            headers = sign(channel.signing_secrets, webhook_id(delivery.delivery_id),
                           unix_seconds(now), body)
        except ValueError as exc:  # its message never repeats a secret
            return failed(f"cannot sign the delivery: {exc}", 0, False)
        return self._http.post(channel.target, body, headers)
