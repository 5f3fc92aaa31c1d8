"""A scheduler refuses to start while a live process uses its CRONLOG_INSTANCE_ID."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from cronlog.infra.config import Settings
from cronlog.infra.kafka.scheduler_identity import (
    InstanceIdInUse,
    refuse_if_in_use,
    scheduler_client_id,
)

SETTINGS = Settings(instance_id="twin")


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def members_for(seconds_present: float, clock: FakeTime
                ) -> tuple[Callable[[Settings, str], Sequence[str]], list[str]]:
    asked: list[str] = []

    def members(_settings: Settings, client_id: str) -> Sequence[str]:
        asked.append(client_id)
        return ["/10.0.0.7"] if clock.now < seconds_present else []

    return members, asked


def test_no_member_with_the_id_starts_at_once() -> None:
    clock = FakeTime()
    members, asked = members_for(0, clock)
    refuse_if_in_use(SETTINGS, 15, members, clock.sleep, clock.monotonic)
    assert asked == [scheduler_client_id("twin")] and clock.now == 0


def test_a_dead_member_is_waited_out() -> None:
    # A process killed with -9 stays in the group until its session times out.
    clock = FakeTime()
    members, _ = members_for(9, clock)
    refuse_if_in_use(SETTINGS, 15, members, clock.sleep, clock.monotonic)
    assert 9 <= clock.now < 15


def test_a_live_member_means_a_clear_refusal() -> None:
    clock = FakeTime()
    members, _ = members_for(float("inf"), clock)
    with pytest.raises(InstanceIdInUse) as error:
        refuse_if_in_use(SETTINGS, 15, members, clock.sleep, clock.monotonic)
    assert "CRONLOG_INSTANCE_ID 'twin' is in use" in str(error.value)
    assert "10.0.0.7" in str(error.value)
    assert 15 <= clock.now <= 16
