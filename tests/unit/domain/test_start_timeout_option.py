"""Issue 13 item 5's job option: a job's own start timeout, bounded like its other
durations; None leaves the scheduler's default."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import JobSpec, validate_spec

GOOD = JobSpec(name="starts", tenant="acme", queue="default", handler="echo",
               cron="*/5 * * * *")


def with_start_timeout(value: timedelta | None) -> JobSpec:
    return JobSpec(**{**GOOD.__dict__, "start_timeout": value})


def test_no_start_timeout_means_the_schedulers_default() -> None:
    assert GOOD.start_timeout is None
    assert validate_spec(GOOD).start_timeout is None


@pytest.mark.parametrize("value", [timedelta(seconds=1), timedelta(seconds=10),
                                   timedelta(days=7)])
def test_a_start_timeout_from_a_second_to_seven_days_is_kept(value: timedelta) -> None:
    assert validate_spec(with_start_timeout(value)).start_timeout == value


@pytest.mark.parametrize("value", [
    timedelta(0), timedelta(milliseconds=999), timedelta(seconds=-1),
    timedelta(days=7, seconds=1), timedelta.max,
])
def test_a_start_timeout_out_of_bounds_is_refused_naming_the_field(value: timedelta) -> None:
    with pytest.raises(InvalidSpec) as caught:
        validate_spec(with_start_timeout(value))
    assert caught.value.field == "spec.start_timeout"
