"""A job's notify rule and the throttle (notifications/rules.py): the rule's bounds and its
errors naming the field; one message per job and kind per interval, the rest counted into
a digest, memory bounded; with a property test that no alert is lost uncounted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.notify_rule import (
    DEFAULT_ON,
    MAX_CHANNELS_PER_JOB,
    AlertKind,
    NotifyRule,
    notify_rule,
)
from cronlog.notifications.model import KIND_TEXT, AlertMessage, KindText, TenantAlert
from cronlog.notifications.rules import Throttle
from tests.support.examples import examples
from tests.support.notifications import T0, alert, sample_id

S = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
FAILED = AlertKind.FAILED


# The rule.

def test_a_rule_names_channels_and_the_kinds_it_wants() -> None:
    rule = notify_rule(["ops-webhook", "team.slack"], ["failed", "recovered"])
    assert rule == NotifyRule(("ops-webhook", "team.slack"),
                              frozenset({AlertKind.FAILED, AlertKind.RECOVERED}))
    assert rule.wants(AlertKind.RECOVERED) and not rule.wants(AlertKind.DEAD_LETTERED)
    every = notify_rule(["a"], [kind.value for kind in AlertKind])
    assert every.on == frozenset(AlertKind)


def test_a_rule_that_names_no_kind_wants_dead_letters() -> None:
    assert notify_rule(["ops"]).on == frozenset(DEFAULT_ON) == {AlertKind.DEAD_LETTERED}


@pytest.mark.parametrize(("channels", "field", "reason"), [
    ([], "spec.notify.channels", "name 1 to 5 channels, not 0"),
    ([f"c{n}" for n in range(MAX_CHANNELS_PER_JOB + 1)], "spec.notify.channels",
     "name 1 to 5 channels, not 6"),
    ("ops", "spec.notify.channels", "not a string"),
    (["ops", "has space"], "spec.notify.channels[1]", "must match"),
    (["x" * 129], "spec.notify.channels[0]", "must match"),
    ([""], "spec.notify.channels[0]", "must match"),
    ([7], "spec.notify.channels[0]", "'7' must match"),
    (["ops", "team", "ops"], "spec.notify.channels[2]", "channel 'ops' is named twice"),
])
def test_a_rule_names_1_to_5_channels_by_bounded_names_once_each(
        channels: list[str], field: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        notify_rule(channels, ["failed"])
    assert refused.value.field == field and reason in str(refused.value)
    assert refused.value.status == "INVALID_ARGUMENT"
    assert len(notify_rule(["x" * 128] + [f"c{n}" for n in range(4)]).channels) == 5


@pytest.mark.parametrize(("on", "reason"), [
    (["failed", "exploded"], "unknown kind of alert 'exploded' at [1]; one of dead_lettered, "
                             "failed, recovered, missed, timed_out, started_late, set_aside"),
    (["FAILED"], "unknown kind of alert 'FAILED'"),
    ([None], "unknown kind of alert 'None'"),
    ([], "name 1 to 7 kinds of alert"),
    ("failed", "not a string"),
    (["failed", "failed"], "kind 'failed' is named twice"),
])
def test_an_unknown_kind_is_refused_naming_spec_notify_on(on: list[str], reason: str) -> None:
    with pytest.raises(InvalidSpec) as refused:
        notify_rule(["ops"], on)
    assert refused.value.field == "spec.notify.on"
    assert reason in str(refused.value)
    assert str(refused.value).startswith("spec.notify.on: ")


def test_every_kind_has_its_words_and_its_own_event_type() -> None:
    assert set(KIND_TEXT) == set(AlertKind) | set(TenantAlert)
    types = [words.event_type for words in KIND_TEXT.values()]
    assert len(set(types)) == len(types)
    assert all(KIND_TEXT[k].event_type.split(".")[0] in {"run", "job"} for k in AlertKind)
    assert all(KIND_TEXT[k].event_type.split(".")[0]
               in {"queue", "tenant", "message", "delivery", "channel"} for k in TenantAlert)
    assert KIND_TEXT[TenantAlert.CHANNEL_TEST] == KindText("channel.test", "test alert",
                                                           "test alert", "test alerts")


# The throttle.

def failure(n: int, job: str = "nightly", kind: AlertKind = FAILED,
            tenant: str = "acme") -> AlertMessage:
    return alert(tenant, kind, n, job_id=sample_id("job", tenant, job), job_name=job)


def test_ten_failures_in_a_minute_make_one_alert_and_one_digest() -> None:
    throttle = Throttle(MINUTE, max_keys=100)
    sent = [m for n in range(10) for m in throttle.offer(failure(n), T0 + n * 6 * S)]
    assert [m.alert_id for m in sent] == [failure(0).alert_id]
    assert throttle.flush(T0 + 59 * S) == []
    assert throttle.next_flush_at() == T0 + MINUTE
    (digest,) = throttle.flush(T0 + MINUTE)
    assert (digest.kind, digest.job_id, digest.digest_count) == (FAILED, failure(0).job_id, 9)
    assert digest.message == "9 more failures since 14:02:11Z"
    assert (digest.at, digest.run_id, digest.attempt, digest.job_name) == (
        T0 + MINUTE, None, None, "nightly")
    assert throttle.flush(T0 + 2 * MINUTE) == [], "nothing more: the key is forgotten"
    assert len(throttle) == 0
    assert throttle.offer(failure(10), T0 + 2 * MINUTE) == [failure(10)]


def test_the_digest_is_the_keys_one_message_of_its_interval() -> None:
    throttle = Throttle(MINUTE, max_keys=100)
    throttle.offer(failure(0), T0)
    throttle.offer(failure(1), T0 + 30 * S)
    # No flush ran: the alert after the window's end brings its digest, and is counted in
    # the window the digest opens.
    (digest,) = throttle.offer(failure(2), T0 + 61 * S)
    assert (digest.digest_count, digest.message) == (1, "1 more failure since 14:02:11Z")
    (second,) = throttle.flush(T0 + 121 * S)
    assert (second.digest_count, second.message) == (1, "1 more failure since 14:03:12Z")


def test_each_job_and_kind_has_its_own_window() -> None:
    throttle = Throttle(MINUTE, max_keys=100)
    firsts = [failure(0), failure(1, job="hourly"), failure(2, kind=AlertKind.TIMED_OUT),
              failure(3, tenant="bravo")]
    assert [m for a in firsts for m in throttle.offer(a, T0)] == firsts
    assert throttle.offer(failure(4), T0) == []


def test_the_oldest_key_is_evicted_into_an_immediate_digest_when_memory_is_full() -> None:
    throttle = Throttle(MINUTE, max_keys=2)
    throttle.offer(failure(0, job="a"), T0)
    throttle.offer(failure(1, job="b"), T0 + S)
    for n in range(3):
        throttle.offer(failure(2 + n, job="a"), T0 + 2 * S)
    newcomer = failure(9, job="c")
    digest, sent = throttle.offer(newcomer, T0 + 3 * S)
    assert (digest.job_name, digest.digest_count, digest.at) == ("a", 3, T0 + 3 * S)
    assert sent == newcomer and len(throttle) == 2
    # b is evicted silently (it counted nothing); a's next alert goes out at once.
    assert throttle.offer(failure(10, job="a"), T0 + 4 * S) == [failure(10, job="a")]


def test_a_now_that_goes_back_counts_as_the_latest_seen() -> None:
    throttle = Throttle(MINUTE, max_keys=10)
    throttle.offer(failure(0), T0 + MINUTE)
    assert throttle.offer(failure(1), T0) == []
    assert throttle.flush(T0) == []
    assert len(throttle.flush(T0 + 2 * MINUTE)) == 1


def test_a_digest_over_midnight_gives_the_date_and_digest_ids_are_stable() -> None:
    late = datetime(2026, 12, 6, 23, 59, 30, tzinfo=UTC)

    def run() -> AlertMessage:
        throttle = Throttle(MINUTE, max_keys=10)
        throttle.offer(failure(0), late)
        throttle.offer(failure(1), late + S)
        (digest,) = throttle.flush(late + MINUTE)
        return digest

    digest = run()
    assert digest.message == "1 more failure since 2026-12-06T23:59:30Z"
    assert run().alert_id == digest.alert_id != failure(0).alert_id


def test_a_throttle_is_bounded_in_time_and_keys() -> None:
    for interval, keys in ((timedelta(0), 1), (timedelta(days=2), 1), (MINUTE, 0)):
        with pytest.raises(ValueError, match="throttle"):
            Throttle(interval, keys)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 40), st.booleans()), max_size=60),
       st.integers(1, 6))
def test_no_alert_is_lost_uncounted_and_a_key_gets_one_message_per_interval(
        steps: list[tuple[int, int, bool]], max_keys: int) -> None:
    throttle = Throttle(MINUTE, max_keys=max_keys)
    now = T0
    sent: list[tuple[datetime, AlertMessage]] = []
    offered = 0
    for key, seconds, flush in steps:
        now += seconds * S
        if flush:
            sent += [(now, m) for m in throttle.flush(now)]
        else:
            sent += [(now, m) for m in throttle.offer(failure(offered, job=f"job{key}"), now)]
            offered += 1
        assert len(throttle) <= max_keys
    for end in (now + MINUTE, now + 2 * MINUTE):
        sent += [(end, m) for m in throttle.flush(end)]
    assert len(throttle) == 0
    assert sum(1 if m.digest_count == 0 else m.digest_count for _, m in sent) == offered
    if max_keys >= 5:  # never evicted: the interval holds for every key
        last: dict[str, datetime] = {}
        for at, message in sent:
            if message.job_name in last:
                assert at - last[message.job_name] >= MINUTE
            last[message.job_name] = at
