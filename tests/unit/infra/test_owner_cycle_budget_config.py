"""CRONLOG_OWNER_CYCLE_BUDGET_MS: how long an owner cycle decides (issue 33), 500 ms by
default, 10 to 5,000 ms (below max.poll.interval with a stuck transaction and a rewind),
refused by name otherwise, and passed on to the processes a development tool starts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_env import settings_from_env
from cronlog.infra.kafka.owner_transaction import CALL_TIMEOUT, TRANSACTION_DEADLINE
from cronlog.infra.kafka.owner_transport import MAX_POLL_INTERVAL_MS
from cronlog_dev.processes import settings_env

NAME = "CRONLOG_OWNER_CYCLE_BUDGET_MS"


def test_half_a_second_by_default_well_under_the_lookahead_and_the_group_s_timeouts() -> None:
    settings = settings_from_env({})
    assert settings.owner_cycle_budget == timedelta(milliseconds=500)
    assert settings_from_env({NAME: ""}).owner_cycle_budget == timedelta(milliseconds=500)
    assert settings.owner_cycle_budget <= settings.lookahead / 2
    assert settings.owner_cycle_budget <= settings.owner_session_timeout / 10


def test_the_most_fits_max_poll_interval_with_a_stuck_transaction_and_a_rewind() -> None:
    assert settings_from_env({NAME: "5000"}).owner_cycle_budget == timedelta(seconds=5)
    assert settings_from_env({NAME: "10"}).owner_cycle_budget == timedelta(milliseconds=10)
    assert 5.0 + TRANSACTION_DEADLINE + CALL_TIMEOUT < MAX_POLL_INTERVAL_MS / 1000


@pytest.mark.parametrize("raw", ["0", "-5", "9", "5001", "60000", "half", "1.5"])
def test_anything_else_is_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigError) as error:
        settings_from_env({NAME: raw})
    assert str(error.value).startswith(f"{NAME}: "), error.value


def test_the_development_tools_pass_it_to_their_schedulers() -> None:
    for millis in (10, 250, 500, 5000):
        budget = timedelta(milliseconds=millis)
        again = settings_from_env(settings_env(Settings(owner_cycle_budget=budget)))
        assert again.owner_cycle_budget == budget
