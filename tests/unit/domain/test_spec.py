from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.policies import RetryPolicy
from cronlog.domain.spec import MAX_PAYLOAD_BYTES, JobSpec, validate_spec

GOOD = JobSpec(name="nightly report", tenant="acme", queue="default", handler="echo",
               cron="0 3 * * *", time_zone="Europe/Berlin")


def with_(**changes: object) -> JobSpec:
    return JobSpec(**{**GOOD.__dict__, **changes})


def test_a_good_spec_passes_and_times_are_normalised_to_utc() -> None:
    from zoneinfo import ZoneInfo

    at = datetime(2026, 6, 1, 12, tzinfo=ZoneInfo("Europe/Berlin"))
    spec = validate_spec(with_(cron=None, at=at))
    assert spec.at == datetime(2026, 6, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(("field", "changes"), [
    ("spec.name", {"name": ""}),
    ("spec.tenant", {"tenant": "a b"}),
    ("spec.queue", {"queue": "no spaces allowed"}),
    ("spec.handler", {"handler": ""}),
    ("spec.payload", {"payload": b"x" * (MAX_PAYLOAD_BYTES + 1)}),
    ("spec.time_zone", {"time_zone": "Nowhere/Land"}),
    ("spec.schedule.cron", {"cron": "every day"}),
    ("spec.schedule", {"cron": None}),
    ("spec.schedule", {"at": datetime(2026, 1, 1, tzinfo=UTC)}),
    ("spec.schedule.at", {"cron": None, "at": datetime(2026, 1, 1)}),
    ("spec.end_at", {"start_at": datetime(2026, 2, 1, tzinfo=UTC),
                     "end_at": datetime(2026, 1, 1, tzinfo=UTC)}),
    ("spec.timeout", {"timeout": timedelta(seconds=-1)}),
    ("spec.timeout", {"timeout": timedelta(0)}),
    ("spec.heartbeat_timeout", {"heartbeat_timeout": timedelta(days=8)}),
    ("spec.heartbeat_timeout", {"heartbeat_timeout": timedelta(milliseconds=2999)}),
    ("spec.retry_policy.max_attempts", {"retry_policy": RetryPolicy(max_attempts=0)}),
    ("spec.retry_policy.coefficient", {"retry_policy": RetryPolicy(coefficient=0.5)}),
    ("spec.retry_policy.jitter", {"retry_policy": RetryPolicy(jitter=2.0)}),
    ("spec.retry_policy.max_backoff", {"retry_policy": RetryPolicy(
        initial_backoff=timedelta(seconds=10), max_backoff=timedelta(seconds=1))}),
    ("spec.labels", {"labels": {str(i): "v" for i in range(65)}}),
])
def test_bad_fields_are_named(field: str, changes: dict[str, object]) -> None:
    with pytest.raises(InvalidSpec) as caught:
        validate_spec(with_(**changes))
    assert caught.value.field == field
    assert str(caught.value).startswith(field)


def test_backoff_grows_is_capped_and_jitter_stays_in_range() -> None:
    policy = RetryPolicy(initial_backoff=timedelta(seconds=1), max_backoff=timedelta(seconds=10),
                         coefficient=2.0, jitter=0.0)
    assert [policy.backoff(n, 0.5).total_seconds() for n in (1, 2, 3, 4, 5)] == [1, 2, 4, 8, 10]
    full = RetryPolicy(jitter=1.0)
    assert full.backoff(3, 0.0) == timedelta(0)
    assert full.backoff(3, 0.999) < timedelta(seconds=4)
    assert RetryPolicy(max_attempts=3).retries(2, "X")
    assert not RetryPolicy(max_attempts=3).retries(3, "X")
    assert not RetryPolicy(non_retryable_errors=("Fatal",)).retries(1, "Fatal")
