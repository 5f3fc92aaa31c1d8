"""The notifier role's object graph: the composition root's part for `cronlog notifier`
(infra/composition.py builds the other roles). Nothing connects at import."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from cronlog.infra.config import Settings

if TYPE_CHECKING:
    from cronlog.infra.notifier.notifier_loop import NotifierLoop
    from cronlog.infra.observability.notifier import NotifierObservation

# How long a delivery's retry windows grow: doubling from the base up to this.
RETRY_CAP_SECONDS = 3600


def build_notifier(settings: Settings,
                   observation: NotifierObservation | None = None) -> NotifierLoop:
    """observation: given the loop's metrics, its consumer's statistics and what its
    readiness reads (infra/observability/notifier.py)."""
    from datetime import timedelta

    from cronlog.infra.composition import build_codec
    from cronlog.infra.kafka.event_feed import KafkaEventFeed
    from cronlog.infra.notifier.kafka_delivery_log import KafkaDeliveryLog
    from cronlog.infra.notifier.notifier_loop import NotifierLoop
    from cronlog.infra.notifier.postgres_deliveries import (
        PostgresChannelDirectory,
        PostgresDeliveries,
    )
    from cronlog.infra.notifier.senders import alert_senders
    from cronlog.infra.observability.notifier import NOTIFIER_CLIENT
    from cronlog.infra.system_clock import SystemClock
    from cronlog.notifications.notifier import Notifier
    from cronlog.notifications.retry_plan import RetryPlan
    from cronlog.notifications.rules import Throttle

    PostgresDeliveries.ensure_schema(settings.postgres_dsn)
    store = PostgresDeliveries(settings.postgres_dsn)
    directory = PostgresChannelDirectory(settings.postgres_dsn,
                                         settings.alert_signing_key or None)
    notifier = Notifier(
        store, directory, KafkaDeliveryLog(settings, build_codec()), random.SystemRandom(),
        RetryPlan(base=settings.alert_retry_base,
                  cap=max(settings.alert_retry_base, timedelta(seconds=RETRY_CAP_SECONDS)),
                  give_up_after=settings.alert_retry_for),
        Throttle(settings.alert_throttle, max_keys=10_000))
    feed = KafkaEventFeed(settings, "notifier", [settings.alerts_topic], build_codec(),
                          on_statistics=observation.kafka.listener(NOTIFIER_CLIENT)
                          if observation is not None else None)
    if observation is not None:
        observation.watch(lambda: feed.assignment)
    return NotifierLoop(feed, notifier, alert_senders(settings), SystemClock(),
                        settings.notifier_senders, metrics=observation, prune=store.prune)
