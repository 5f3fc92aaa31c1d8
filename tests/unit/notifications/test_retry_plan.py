"""A delivery's retries (notifications/retry_plan.py): doubling windows up to a cap, a full
jitter draw inside each, nothing after the give-up time, the same delivery id every time;
with property tests against a plain model of the windows."""

from __future__ import annotations

import random
from datetime import timedelta
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.notify_rule import AlertKind
from cronlog.notifications.model import AlertMessage
from cronlog.notifications.retry_plan import (
    MAX_PLANNED_ATTEMPTS,
    RetryPlan,
    delivery_id,
    first_delivery,
)
from tests.support.examples import examples
from tests.support.notifications import T0, Draws

S = timedelta(seconds=1)
ALERT_ID = UUID("0e6f2a1b-9c3d-4e5f-8a7b-6c5d4e3f2a1b")
CHANNEL = UUID("7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")
LOW, HIGH = Draws([0.0]), Draws([0.999999])


def alert() -> AlertMessage:
    return AlertMessage(ALERT_ID, "acme", AlertKind.DEAD_LETTERED, UUID(int=1), "nightly",
                        UUID(int=2), 3, "exit status 1", T0)


def test_the_delivery_id_is_the_same_for_the_same_alert_and_channel_and_only_then() -> None:
    assert delivery_id(ALERT_ID, CHANNEL) == delivery_id(UUID(str(ALERT_ID)), CHANNEL)
    assert delivery_id(ALERT_ID, CHANNEL) != delivery_id(CHANNEL, ALERT_ID)
    assert delivery_id(ALERT_ID, CHANNEL) != delivery_id(ALERT_ID, UUID(int=CHANNEL.int ^ 1))
    # Pinned: receivers recognise a retry by it, across notifier versions too.
    assert delivery_id(ALERT_ID, CHANNEL) == UUID("c44b1e18-cea3-586c-889f-26cc5eb80376")


def test_a_first_delivery_is_attempt_1_not_yet_taken() -> None:
    delivery = first_delivery(alert(), CHANNEL, T0)
    assert delivery.delivery_id == delivery_id(ALERT_ID, CHANNEL)
    assert (delivery.attempt, delivery.first_at, delivery.due_at) == (1, None, T0)
    assert delivery.tenant == "acme" and delivery.channel_id == CHANNEL


def test_the_windows_double_from_the_base_up_to_the_cap_and_follow_each_other() -> None:
    plan = RetryPlan(base=5 * S, cap=60 * S, give_up_after=timedelta(hours=1))
    assert [plan.window(n) for n in range(1, 8)] == [
        (0 * S, 5 * S), (5 * S, 10 * S), (15 * S, 20 * S), (35 * S, 40 * S),
        (75 * S, 60 * S), (135 * S, 60 * S), (195 * S, 60 * S)]


def test_the_next_attempt_is_drawn_across_its_whole_window() -> None:
    plan = RetryPlan(base=5 * S, cap=60 * S, give_up_after=timedelta(hours=1))
    assert plan.next_attempt_at(1, T0, LOW) == T0
    assert plan.next_attempt_at(3, T0, LOW) == T0 + 15 * S
    assert plan.next_attempt_at(3, T0, Draws([0.5])) == T0 + 25 * S
    high = plan.next_attempt_at(3, T0, HIGH)
    assert high is not None and T0 + 34 * S < high < T0 + 35 * S


def test_nothing_is_planned_at_or_after_the_give_up_time() -> None:
    plan = RetryPlan(base=5 * S, cap=60 * S, give_up_after=100 * S)
    # Window 5 opens at 75 s and is cut at 100 s.
    late = plan.next_attempt_at(5, T0, HIGH)
    assert late is not None and T0 + 99 * S < late <= T0 + 100 * S
    assert plan.next_attempt_at(6, T0, LOW) is None  # would open at 135 s
    assert plan.max_attempts == 6
    assert plan.gives_up_at(T0) == T0 + 100 * S


def test_without_time_to_retry_there_is_one_attempt() -> None:
    plan = RetryPlan(give_up_after=timedelta(0))
    assert plan.max_attempts == 1
    assert plan.next_attempt_at(1, T0, LOW) is None


def test_the_defaults_retry_for_a_day_in_windows_of_up_to_an_hour() -> None:
    plan = RetryPlan()
    count = attempts(plan, random.Random(7))
    assert count == plan.max_attempts == 34
    assert plan.window(12) == (timedelta(seconds=5 * 1023 + 3600), timedelta(hours=1))


def test_a_huge_attempt_number_is_answered_at_once() -> None:
    plan = RetryPlan()
    assert plan.window(10**12) == (timedelta.max, timedelta(hours=1))
    assert plan.next_attempt_at(10**12, T0, LOW) is None


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"base": timedelta(0)}, "retry base: at least 1 µs"),
    ({"base": 10 * S, "cap": 5 * S}, "retry cap: at least the base"),
    ({"give_up_after": -S}, "retry give_up_after: 0 to 31 days"),
    ({"cap": timedelta(days=1), "give_up_after": timedelta(days=32)}, "give_up_after: 0 to"),
    ({"base": S, "cap": S, "give_up_after": timedelta(hours=1)}, "3601 attempts"),
])
def test_a_plan_that_is_not_bounded_is_refused(kwargs: dict[str, timedelta], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        RetryPlan(**kwargs)


def test_an_attempt_number_below_1_or_a_draw_outside_0_1_is_refused() -> None:
    plan = RetryPlan()
    for attempt in (0, -1, True):
        with pytest.raises(ValueError, match="attempt: a number from 1"):
            plan.next_attempt_at(attempt, T0, LOW)
    for draw in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="random source"):
            plan.next_attempt_at(1, T0, Draws([draw]))


def attempts(plan: RetryPlan, rng: random.Random | Draws) -> int:
    """How many attempts a delivery that always fails gets."""
    attempt = 1
    while plan.next_attempt_at(attempt, T0, rng) is not None:
        attempt += 1
        assert attempt <= MAX_PLANNED_ATTEMPTS
    return attempt


def model_windows(plan: RetryPlan, count: int) -> list[tuple[timedelta, timedelta]]:
    opened, found = timedelta(0), []
    for n in range(1, count + 1):
        # The doubling stops at the cap: 2 ** 40 bases exceed any cap drawn here, and a
        # longer product would overflow timedelta.
        length = min(plan.cap, plan.base * 2 ** min(n - 1, 40))
        found.append((opened, length))
        opened += length
    return found


def plan_or_none(base: int, factor: int, give_up: int) -> RetryPlan | None:
    """The plan, or None for one the class refuses (more attempts than it plans): those are
    tested apart, and drawing them here would fail the draw, not the property."""
    try:
        return RetryPlan(base=base * S, cap=base * factor * S, give_up_after=give_up * S)
    except ValueError:
        return None


plans = st.builds(plan_or_none, st.integers(1, 30), st.integers(1, 64),
                  st.integers(0, 3_000)).filter(lambda plan: plan is not None)


@settings(max_examples=examples(150), deadline=None)
@given(plans, st.randoms(use_true_random=False))
def test_every_planned_attempt_is_in_its_window_before_the_give_up_time(
        plan: RetryPlan, rng: random.Random) -> None:
    count = attempts(plan, rng)
    assert count == plan.max_attempts
    windows = model_windows(plan, count + 1)
    assert [plan.window(n) for n in range(1, count + 2)] == windows
    for n in range(1, count):
        at = plan.next_attempt_at(n, T0, rng)
        opened, length = windows[n - 1]
        assert at is not None
        assert T0 + opened <= at <= min(T0 + opened + length, plan.gives_up_at(T0))
        assert opened < plan.give_up_after
    assert windows[count - 1][0] >= plan.give_up_after, "given up only once out of time"
