"""Slack channels: the alert as an incoming webhook's payload (rendering.slack_payload),
POSTed as JSON to the channel's incoming-webhook URL through the egress fence
(http_delivery.py). Slack answers 200 `ok`, or an error word in the body (404
`channel_not_found`, 403 `action_prohibited`, 410 `channel_is_archived`, 429 when rate
limited) that the result's error quotes. Not signed: the URL itself is Slack's secret, so
no result or log line repeats it."""

from __future__ import annotations

import json
from datetime import datetime

from cronlog.domain.channel import ChannelKind
from cronlog.infra.notifier.http_delivery import HttpDelivery
from cronlog.notifications.model import ChannelTarget, Delivery, DeliveryResult
from cronlog.notifications.outcomes import failed, unsendable
from cronlog.notifications.rendering import slack_payload


def slack_body(delivery: Delivery) -> bytes:
    """The payload as compact UTF-8 JSON."""
    return json.dumps(slack_payload(delivery.alert), ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


class SlackSender:
    """An AlertSender for Slack channels."""

    kind = ChannelKind.SLACK

    def __init__(self, http: HttpDelivery) -> None:
        self._http = http

    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        refusal = unsendable(delivery, channel, self.kind)
        if refusal is not None:
            return failed(refusal, 0, False)
        return self._http.post(channel.target, slack_body(delivery), {})
