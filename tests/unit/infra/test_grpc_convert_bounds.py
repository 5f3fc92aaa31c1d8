"""Issue 13 item 2 at the door: every protobuf time and duration converts to a value in range
or to InvalidSpec naming the field, never to an OverflowError."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given, settings
from hypothesis import strategies as st

from cronlog.domain.bounds import LONGEST_DURATION, in_range
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.grpc.convert import duration_in, instant_in, spec_in
from cronlog.v1 import job_service_pb2 as pb
from tests.support.examples import examples

INT64 = st.integers(-(2**63), 2**63 - 1)
NANOS = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=examples(300), deadline=None)
@given(seconds=INT64, nanos=NANOS)
def test_any_duration_is_in_range_or_names_its_field(seconds: int, nanos: int) -> None:
    try:
        value = duration_in(Duration(seconds=seconds, nanos=nanos), "spec.timeout")
    except InvalidSpec as exc:
        assert exc.field == "spec.timeout"
        return
    assert abs(value) <= LONGEST_DURATION


@settings(max_examples=examples(300), deadline=None)
@given(seconds=INT64, nanos=NANOS)
def test_any_timestamp_is_in_range_or_names_its_field(seconds: int, nanos: int) -> None:
    try:
        value = instant_in(Timestamp(seconds=seconds, nanos=nanos), "spec.start_at")
    except InvalidSpec as exc:
        assert exc.field == "spec.start_at"
        return
    assert in_range(value)


@pytest.mark.parametrize(("seconds", "nanos", "expected"), [
    (5, 500_000_000, timedelta(seconds=5.5)),
    (-5, -500_000_000, timedelta(seconds=-5.5)),
    (0, 999_999_999, timedelta(microseconds=999_999)),
    (int(LONGEST_DURATION.total_seconds()), 0, LONGEST_DURATION),
])
def test_valid_durations_convert_exactly(seconds: int, nanos: int, expected: timedelta) -> None:
    assert duration_in(Duration(seconds=seconds, nanos=nanos), "f") == expected


@pytest.mark.parametrize(("seconds", "nanos"), [
    (10**15, 0), (-(10**15), 0), (5, -1), (-5, 1), (0, 1_000_000_000), (0, -1_000_000_000)])
def test_invalid_or_huge_durations_are_refused(seconds: int, nanos: int) -> None:
    with pytest.raises(InvalidSpec) as caught:
        duration_in(Duration(seconds=seconds, nanos=nanos), "spec.retry_policy.max_backoff")
    assert caught.value.field == "spec.retry_policy.max_backoff"


def _spec(**fields: object) -> pb.JobSpec:
    spec = pb.JobSpec(name="n", tenant="t", handler="echo", cron="* * * * *")
    for name, value in fields.items():
        target = spec
        *path, last = name.split(".")
        for part in path:
            target = getattr(target, part)
        getattr(target, last).CopyFrom(value)
    return spec


def _at(year: int) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(datetime(year, 1, 1, tzinfo=UTC))
    return ts


@pytest.mark.parametrize(("name", "value", "field"), [
    ("start_at", _at(9999), "spec.start_at"),
    ("end_at", _at(2100), "spec.end_at"),
    ("timeout", Duration(seconds=10**12), "spec.timeout"),
    ("heartbeat_timeout", Duration(seconds=1, nanos=-1), "spec.heartbeat_timeout"),
    ("spread", Duration(seconds=-(10**15)), "spec.spread"),
    ("retry_policy.initial_backoff", Duration(seconds=2**62),
     "spec.retry_policy.initial_backoff"),
    ("retry_policy.max_backoff", Duration(seconds=2**62), "spec.retry_policy.max_backoff"),
])
def test_a_spec_out_of_range_names_the_field(name: str, value: object, field: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        spec_in(_spec(**{name: value}))
    assert caught.value.field == field


def test_a_one_off_before_1970_is_refused_at_the_door() -> None:
    spec = pb.JobSpec(name="n", tenant="t", handler="echo")
    spec.at.CopyFrom(_at(1969))
    with pytest.raises(InvalidSpec) as caught:
        spec_in(spec)
    assert caught.value.field == "spec.schedule.at"
