"""AttemptRecords for the tests of the record of deliveries (unit, integration, e2e): one
attempt of a tenant's alert to one of its channels, with defaults."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from uuid import UUID

from cronlog.domain.channel import ChannelKind
from cronlog.notifications.model import AttemptOutcome, AttemptRecord, DeliveryResult
from tests.support.notifications import T0, alert, channel, delivery


def attempt_record(tenant: str = "acme", n: int = 0, to: str | int = 0, attempt: int = 1,
                   outcome: AttemptOutcome = AttemptOutcome.DELIVERED,
                   sent_at: datetime = T0, job_id: UUID | None = None,
                   channel_name: str = "ops-hook") -> AttemptRecord:
    """Attempt `attempt` of alert `n` of the tenant to its channel `to`, sent at `sent_at`,
    with the outcome's usual result (200, 503 retrying, 410 failed)."""
    d = delivery(tenant, n, to)
    if job_id is not None:
        d = replace(d, alert=replace(d.alert, job_id=job_id))
    d = replace(d, attempt=attempt, channel_id=channel(tenant, to))
    result = {AttemptOutcome.DELIVERED: DeliveryResult(True, 200, 42),
              AttemptOutcome.RETRYING: DeliveryResult(False, 503, 84, "HTTP 503", True),
              AttemptOutcome.FAILED: DeliveryResult(False, 410, 12, "HTTP 410 Gone")}[outcome]
    return AttemptRecord(
        delivery=d, channel_name=channel_name, channel_kind=ChannelKind.WEBHOOK,
        result=result, sent_at=sent_at, outcome=outcome,
        next_attempt_at=sent_at + timedelta(seconds=30)
        if outcome is AttemptOutcome.RETRYING else None)


__all__ = ["T0", "alert", "attempt_record"]
