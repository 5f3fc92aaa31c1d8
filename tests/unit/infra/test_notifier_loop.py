"""The notifier role's loop (notifications/notifier_loop.py) on in-memory ports: an alert's
position is committed only once its deliveries are kept, a batch that could not be kept is
tried again before anything more is read, sends run on the senders' threads and their
answers come back to the notifier, and partitions follow the group's assignment."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cronlog.domain.catalogue import OwnerRecord
from cronlog.infra.notifier.notifier_loop import NotifierLoop
from cronlog.notifications.model import ChannelTarget, Delivery, DeliveryResult
from cronlog.notifications.notifier import Notifier
from cronlog.notifications.retry_plan import RetryPlan
from cronlog.notifications.rules import Throttle
from cronlog.ports import InboundMessage, StoreUnavailable
from tests.support.clock import FakeClock
from tests.support.notifications import T0, Draws
from tests.support.notifier_fakes import Directory, Log, Store, record
from tests.support.polling import wait_for

S = timedelta(seconds=1)


@dataclass
class Feed:
    batches: list[list[InboundMessage]] = field(default_factory=list)
    committed: list[int] = field(default_factory=list)
    assignment: frozenset[tuple[str, int]] | None = frozenset({("alerts", 0)})

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]:
        return self.batches.pop(0) if self.batches else []

    def commit(self, applied: Sequence[InboundMessage]) -> None:
        self.committed.extend(m.offset for m in applied)

    def close(self) -> None:
        pass


@dataclass
class Sender:
    sent: list[Delivery] = field(default_factory=list)

    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        self.sent.append(delivery)
        return DeliveryResult(ok=True, status_code=200, latency_ms=1)


class FlakyStore(Store):
    fail_next = 0

    def add(self, partition: int, deliveries: Sequence[Delivery]) -> set[UUID]:
        if self.fail_next:
            self.fail_next -= 1
            raise StoreUnavailable("postgres restarting")
        return super().add(partition, deliveries)


def message(offset: int, **fields: Any) -> InboundMessage:
    return InboundMessage("alerts", 0, offset, OwnerRecord.ALERT,
                          record("run_dead_lettered", run=offset, job=f"j{offset}", **fields),
                          b"")


def test_alerts_are_kept_then_committed_sent_and_recorded() -> None:
    store, directory, log, feed, sender = FlakyStore(), Directory(), Log(), Feed(), Sender()
    directory.add("acme", "ops", default=True)
    notifier = Notifier(store, directory, log, Draws([0.5]), RetryPlan(), Throttle(60 * S, 10))
    loop = NotifierLoop(feed, notifier, sender, FakeClock(T0), senders=2)
    feed.batches = [[message(0), message(1)], [message(2)]]
    store.fail_next = 1
    with contextlib.suppress(StoreUnavailable):
        loop.run_once()  # the store refuses the first batch: nothing committed
    assert feed.committed == [] and not store.rows
    loop.run_once()  # the batch in hand first, then the next one
    assert feed.committed == [0, 1, 2]
    assert len(store.rows) == 3

    def all_recorded() -> bool:
        loop.run_once()
        return len(log.records) == 3

    wait_for(all_recorded, 10, "every delivery sent and recorded", interval=0.01)
    assert len(sender.sent) == 3
    assert {status for _, _, status in store.rows.values()} == {"delivered"}


def test_partitions_follow_the_assignment() -> None:
    store, directory, feed = Store(), Directory(), Feed()
    directory.add("acme", "ops", default=True)
    notifier = Notifier(store, directory, Log(), Draws([0.5]), RetryPlan(),
                        Throttle(60 * S, 10))
    loop = NotifierLoop(feed, notifier, Sender(), FakeClock(T0), senders=1)
    feed.assignment = None  # joining: nothing yet
    loop.run_once()
    feed.assignment = frozenset({("alerts", 0)})
    feed.batches = [[message(0)]]
    loop.run_once()
    assert notifier.held == 1 or store.rows
    feed.assignment = frozenset()
    loop.run_once()
    assert notifier.held == 0
