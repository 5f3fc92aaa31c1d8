"""The notifier's senders from Settings, as one AlertSender that picks the sender of each
channel's kind: webhook and Slack through the outbound fence of infra/outbound_policy.py
with CRONLOG_ALERT_HTTP_TIMEOUT_MS, e-mail through CRONLOG_SMTP_* (off when unset)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType

from cronlog.domain.channel import ChannelKind
from cronlog.infra.config import Settings
from cronlog.infra.notifier.email_sender import EmailSender, SmtpServer
from cronlog.infra.notifier.http_delivery import HttpDelivery
from cronlog.infra.notifier.slack_sender import SlackSender
from cronlog.infra.notifier.webhook_sender import WebhookSender
from cronlog.infra.outbound_policy import outbound_policy
from cronlog.notifications.model import ChannelTarget, Delivery, DeliveryResult
from cronlog.notifications.outcomes import failed
from cronlog.notifications.ports import AlertSender

log = logging.getLogger(__name__)


class ChannelSenders:
    """An AlertSender over one sender per kind. A sender that raises, against its contract,
    fails only that attempt, not retried, and is logged: one delivery's bug stops no other
    (invariant 9)."""

    def __init__(self, senders: Mapping[ChannelKind, AlertSender]) -> None:
        self._senders = MappingProxyType(dict(senders))

    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        sender = self._senders.get(channel.kind)
        if sender is None:
            return failed(f"no sender for {channel.kind} channels", 0, False)
        try:
            return sender.send(delivery, channel, now)
        except Exception as exc:
            log.exception("the %s sender raised on delivery %s", channel.kind,
                          delivery.delivery_id)
            return failed(f"the {channel.kind} sender failed: {type(exc).__name__}", 0, False)


def alert_senders(settings: Settings) -> ChannelSenders:
    http = HttpDelivery(outbound_policy(settings), settings.alert_http_timeout)
    return ChannelSenders({ChannelKind.WEBHOOK: WebhookSender(http),
                           ChannelKind.SLACK: SlackSender(http),
                           ChannelKind.EMAIL: EmailSender(SmtpServer.from_settings(settings))})
