"""Provisioning on a cluster: the broker asked for a new topic's configs may not know the
topic yet (UNKNOWN_TOPIC_OR_PART, seen on a fresh 3-node cluster); it is asked again until
a deadline, and any other error is raised at once."""

from __future__ import annotations

import time
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from cronlog.infra.kafka import topics


class Entry:
    def __init__(self, value: str) -> None:
        self.value = value


class Resource:
    def __init__(self, name: str) -> None:
        self.name = name


class Admin:
    """Answers describe_configs with the errors given, one call each, then with configs."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = errors
        self.calls = 0

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Any]:
        self.calls += 1
        answers = {}
        for resource in resources:
            future: Future[dict[str, Entry]] = Future()
            if self.errors:
                future.set_exception(KafkaException(KafkaError(self.errors[0])))
            else:
                future.set_result({"retention.ms": Entry("1")})
            answers[Resource(resource.name)] = future
        if self.errors:
            self.errors.pop(0)
        return answers


def test_a_topic_unknown_to_the_broker_asked_is_asked_again() -> None:
    admin = Admin([KafkaError.UNKNOWN_TOPIC_OR_PART] * 2)
    configs = topics._configs(admin, ["t"], time.monotonic() + 30)  # type: ignore[arg-type]
    assert configs == {"t": {"retention.ms": "1"}} and admin.calls == 3


def test_past_the_deadline_the_error_is_raised() -> None:
    admin = Admin([KafkaError.UNKNOWN_TOPIC_OR_PART] * 2)
    with pytest.raises(KafkaException):
        topics._configs(admin, ["t"], time.monotonic() - 1)  # type: ignore[arg-type]
    assert admin.calls == 1


def test_another_error_is_raised_at_once() -> None:
    admin = Admin([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        topics._configs(admin, ["t"], time.monotonic() + 30)  # type: ignore[arg-type]
    assert admin.calls == 1
