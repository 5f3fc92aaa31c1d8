"""The notifier's cycle (notifications/notifier.py) on in-memory ports: alerts to deliveries
per channel, sent, recorded, retried with the same id, given up and told to the tenant's
other channels; recoveries; digests; fairness; partitions handed over."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import uuid4

from cronlog.notifications.model import (
    AttemptOutcome,
    DeliveryResult,
    TenantAlert,
)
from cronlog.notifications.notifier import Notifier, NotifierBounds, ReceivedAlert, Send
from cronlog.notifications.retry_plan import RetryPlan
from cronlog.notifications.rules import Throttle
from tests.support.notifications import T0, Draws, channel
from tests.support.notifier_fakes import Directory, Log, Store, record

S = timedelta(seconds=1)
OK = DeliveryResult(ok=True, status_code=204, latency_ms=3)
DOWN = DeliveryResult(ok=False, status_code=503, latency_ms=3, error="HTTP 503",
                      retryable=True)


def world(**bounds: int) -> tuple[Notifier, Store, Directory, Log]:
    store, directory, log = Store(), Directory(), Log()
    notifier = Notifier(store, directory, log, Draws([0.5]),
                        RetryPlan(base=5 * S, cap=60 * S, give_up_after=30 * S),
                        Throttle(60 * S, 100), NotifierBounds(**bounds))
    notifier.adopt([0], T0)
    return notifier, store, directory, log


def received(*records: dict[str, Any]) -> list[ReceivedAlert]:
    return [ReceivedAlert(0, r, f"alerts/0/{i}") for i, r in enumerate(records)]


def send_all(notifier: Notifier, now: datetime,
             answer: DeliveryResult | dict[str, DeliveryResult] = OK) -> list[Send]:
    sends = notifier.due(now, 100)
    for s in sends:
        result = answer if isinstance(answer, DeliveryResult) else answer[s.channel.name]  # type: ignore[union-attr]
        notifier.finished(s, result, now)
    return sends


RULE = {"channels": ["ops", "mail"], "on": ["dead_lettered", "failed", "recovered"]}


def test_an_alert_the_rule_wants_is_one_delivery_per_channel_recorded_when_sent() -> None:
    notifier, store, directory, log = world()
    directory.add("acme", "ops")
    directory.add("acme", "mail")
    directory.add("acme", "pager", default=True)
    notifier.receive(received(record("run_dead_lettered", notify=RULE)), T0)
    assert len(store.rows) == 2  # kept before the alert's position is committed
    sends = send_all(notifier, T0)
    assert sorted(s.channel.name for s in sends) == ["mail", "ops"]  # type: ignore[union-attr]
    assert [r.outcome for r in log.records] == [AttemptOutcome.DELIVERED] * 2
    assert {status for _, _, status in store.rows.values()} == {"delivered"}
    # Not wanted by the rule: nothing. No rule: the tenant's default channels.
    notifier.receive(received(record("attempt_timed_out", notify=RULE, run=1)), T0)
    notifier.receive(received(record("run_dead_lettered", run=2, job="other")), T0)
    assert [s.channel.name for s in send_all(notifier, T0)] == ["pager"]  # type: ignore[union-attr]
    # An alert read again (its position not committed): the same deliveries, sent once.
    notifier.receive(received(record("run_dead_lettered", notify=RULE)), T0 + S)
    assert send_all(notifier, T0 + S) == []


def test_a_failed_attempt_is_retried_under_the_same_id_then_given_up_and_told() -> None:
    notifier, store, directory, log = world()
    directory.add("acme", "ops")
    directory.add("acme", "pager", default=True)
    notifier.receive(received(record("run_dead_lettered",
                                     notify={"channels": ["ops"], "on": ["dead_lettered"]})), T0)
    [first] = send_all(notifier, T0, DOWN)
    assert log.records[-1].outcome is AttemptOutcome.RETRYING
    retry_at = log.records[-1].next_attempt_at
    assert retry_at is not None and T0 < retry_at <= T0 + 5 * S
    assert notifier.due(retry_at - timedelta(microseconds=1), 10) == []
    now, attempts = retry_at, 1
    while log.records[-1].outcome is AttemptOutcome.RETRYING:
        [again] = send_all(notifier, now, {"ops": DOWN, "pager": OK})
        assert again.delivery.delivery_id == first.delivery.delivery_id
        attempts += 1
        assert again.delivery.attempt == attempts
        now = log.records[-1].next_attempt_at or now
    assert log.records[-1].outcome is AttemptOutcome.FAILED
    assert now - T0 <= 30 * S
    # The tenant's other default channel is told, once.
    [news] = send_all(notifier, now, {"pager": DOWN})
    assert news.delivery.alert.kind is TenantAlert.DELIVERY_FAILED
    assert "could not be delivered to channel 'ops'" in news.delivery.alert.message
    assert store.rows[first.delivery.delivery_id][2] == "failed"


def test_a_success_is_news_only_after_a_dead_letter() -> None:
    notifier, _, directory, _ = world()
    directory.add("acme", "ops")
    rule = {"channels": ["ops"], "on": ["recovered"]}
    notifier.receive(received(record("run_succeeded", notify=rule, run=1)), T0)
    assert send_all(notifier, T0) == []
    notifier.receive(received(record("run_dead_lettered", notify=rule, run=2)), T0)
    assert send_all(notifier, T0) == []  # the rule does not want dead letters
    notifier.receive(received(record("run_succeeded", notify=rule, run=3)), T0)
    [sent] = send_all(notifier, T0)
    assert sent.delivery.alert.kind.value == "recovered"
    notifier.receive(received(record("run_succeeded", notify=rule, run=4)), T0)
    assert send_all(notifier, T0) == []


def test_ten_failures_in_a_minute_are_one_alert_and_one_digest() -> None:
    notifier, _, directory, _ = world()
    directory.add("acme", "ops")
    rule = {"channels": ["ops"], "on": ["failed"]}
    for n in range(10):
        notifier.receive(received(record("attempt_failed", notify=rule, run=n)), T0 + n * S)
    assert len(send_all(notifier, T0 + 10 * S)) == 1
    notifier.tick(T0 + 59 * S)
    assert send_all(notifier, T0 + 59 * S) == []
    assert notifier.next_wakeup() == T0 + 60 * S
    notifier.tick(T0 + 60 * S)
    [digest] = send_all(notifier, T0 + 60 * S)
    assert digest.delivery.alert.digest_count == 9
    assert digest.delivery.channel_id == channel("acme", "ops")


def test_a_tenants_dead_endpoint_does_not_hold_another_tenants_delivery() -> None:
    notifier, _, directory, _ = world(max_in_flight_per_tenant=1)
    directory.add("slow", "hook", default=True)
    directory.add("fine", "hook", default=True)
    notifier.receive(received(*[record("run_dead_lettered", tenant="slow", run=n,
                                       job=f"j{n}") for n in range(5)]), T0)
    held = notifier.due(T0, 1)  # one of slow's, in flight and not answering
    assert [s.delivery.tenant for s in held] == ["slow"]
    notifier.receive(received(record("run_dead_lettered", tenant="fine")), T0 + S)
    assert [s.delivery.tenant for s in notifier.due(T0 + S, 10)] == ["fine"]


def test_a_full_queue_fails_the_delivery_at_once_recorded() -> None:
    notifier, store, directory, log = world(max_total=2, max_per_tenant=2)
    directory.add("acme", "ops", default=True)
    notifier.receive(received(*[record("run_dead_lettered", run=n, job=f"j{n}")
                                for n in range(3)]), T0)
    assert notifier.held == 2
    assert [r.outcome for r in log.records] == [AttemptOutcome.FAILED]
    assert "not sent" in log.records[0].result.error
    assert sorted(s for _, _, s in store.rows.values()) == ["failed", "pending", "pending"]


def test_unknown_kinds_and_a_v1_record_are_read_without_error() -> None:
    notifier, _, directory, _ = world()
    directory.add("acme", "ops", default=True)
    v1 = {"tenant": "acme", "kind": "run_dead_lettered", "job_id": str(uuid4()),
          "run_id": None, "message": "failed for good", "at": T0}
    notifier.receive(received(record("something_new"), v1), T0)
    [sent] = send_all(notifier, T0)
    assert sent.delivery.alert.alert_id is not None and sent.delivery.alert.job_name == ""


def test_another_notifier_carries_on_with_the_pending_deliveries() -> None:
    notifier, store, directory, _ = world()
    directory.add("acme", "ops", default=True)
    notifier.receive(received(record("run_dead_lettered")), T0)
    [taken] = notifier.due(T0, 10)
    notifier.forget([0], T0)
    notifier.finished(taken, DOWN, T0)  # answered after the hand-over: kept, not queued
    assert notifier.held == 0
    successor = Notifier(store, directory, Log(), Draws([0.5]), RetryPlan(),
                         Throttle(60 * S, 10))
    successor.adopt([0], T0)
    [again] = successor.due(T0 + 10 * S, 10)
    assert again.delivery.delivery_id == taken.delivery.delivery_id
    assert again.delivery.attempt == 2


def test_an_alert_read_again_after_a_restart_is_not_sent_again() -> None:
    notifier, store, directory, log = world()
    directory.add("acme", "ops", default=True)
    notifier.receive(received(record("run_dead_lettered")), T0)
    send_all(notifier, T0)
    restarted = Notifier(store, directory, log, Draws([0.5]), RetryPlan(),
                         Throttle(60 * S, 10))
    restarted.adopt([0], T0 + S)
    restarted.receive(received(record("run_dead_lettered")), T0 + S)  # not committed before
    assert send_all(restarted, T0 + S) == []
    assert len(log.records) == 1


def test_a_channel_deleted_before_its_delivery_is_sent_fails_it_recorded() -> None:
    notifier, store, directory, log = world()
    directory.add("acme", "ops")
    notifier.receive(received(record("run_dead_lettered",
                                     notify={"channels": ["ops"], "on": ["dead_lettered"]})), T0)
    directory.delete("acme", "ops")
    assert notifier.due(T0, 10) == []
    [attempt] = log.records
    assert attempt.outcome is AttemptOutcome.FAILED and attempt.channel_name == "ops"
    assert attempt.result.error == "the channel was deleted"
    assert notifier.held == 0
    assert {status for _, _, status in store.rows.values()} == {"failed"}
