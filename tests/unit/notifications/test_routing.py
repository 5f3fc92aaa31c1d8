"""Which alert an Alert record is and who gets it (notifications/routing.py)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest

from cronlog.domain.notify_rule import AlertFact, AlertKind
from cronlog.notifications.model import TenantAlert
from cronlog.notifications.routing import recovered, route
from tests.support.notifications import T0

JOB = uuid4()
RULE = {"channels": ["ops", "mail"], "on": ["failed", "missed"]}


def record(kind: str, notify: dict[str, Any] | None = None, **changes: Any) -> dict[str, Any]:
    return {"alert_id": UUID(int=5), "tenant": "acme", "kind": kind, "job_id": JOB,
            "job_name": "nightly", "run_id": UUID(int=9), "attempt": 2, "message": "m",
            "at": T0, "notify": notify, **changes}


@pytest.mark.parametrize(("fact", "kind"), [
    (AlertFact.ATTEMPT_FAILED, AlertKind.FAILED),
    (AlertFact.FIRE_TIMES_MISSED, AlertKind.MISSED)])
def test_a_fact_the_rule_wants_goes_to_its_channels(fact: AlertFact, kind: AlertKind) -> None:
    routed = route(record(fact.value, RULE), "alerts/0/1")
    assert routed is not None
    assert routed.channels == ("ops", "mail") and routed.alert.kind is kind
    assert routed.alert.alert_id == UUID(int=5) and routed.alert.attempt == 2


def test_a_fact_the_rule_does_not_want_goes_nowhere() -> None:
    assert route(record("attempt_timed_out", RULE), "alerts/0/1") is None
    assert route(record("run_dead_lettered", RULE), "alerts/0/1") is None


@pytest.mark.parametrize("fact", ["run_dead_lettered", "job_set_aside"])
def test_without_a_rule_dead_letters_and_set_asides_go_to_the_default_channels(
        fact: str) -> None:
    routed = route(record(fact), "alerts/0/1")
    assert routed is not None and routed.channels is None


def test_without_a_rule_a_jobs_other_facts_go_nowhere() -> None:
    assert route(record("attempt_failed"), "alerts/0/1") is None


@pytest.mark.parametrize(("fact", "kind"), [
    ("queue_unserved", TenantAlert.QUEUE_UNSERVED),
    ("tenant_in_flight_limit", TenantAlert.IN_FLIGHT_LIMIT),
    ("message_set_aside", TenantAlert.MESSAGE_SET_ASIDE)])
def test_tenant_level_facts_go_to_the_default_channels_whatever_the_rule(
        fact: str, kind: TenantAlert) -> None:
    routed = route(record(fact, RULE), "alerts/0/1")
    assert routed is not None and routed.channels is None and routed.alert.kind is kind


def test_an_unknown_fact_is_left_alone() -> None:
    assert route(record("something_new", RULE), "alerts/0/1") is None


def test_a_v1_record_gets_an_id_from_where_it_was_read() -> None:
    v1 = {"tenant": "acme", "kind": "run_dead_lettered", "job_id": str(JOB), "run_id": None,
          "message": "failed for good", "at": T0}
    first, again, elsewhere = (route(v1, "alerts/0/7"), route(v1, "alerts/0/7"),
                               route(v1, "alerts/1/7"))
    assert first is not None and again is not None and elsewhere is not None
    assert first.alert.alert_id == again.alert.alert_id != elsewhere.alert.alert_id
    assert first.alert.job_name == "" and first.alert.run_id is None
    assert first.alert.attempt is None


def test_a_success_becomes_the_recovery_it_is() -> None:
    routed = route(record("run_succeeded", {"channels": ["ops"], "on": ["recovered"]}),
                   "alerts/0/1")
    assert routed is not None and routed.fact is AlertFact.RUN_SUCCEEDED
    news = recovered(routed.alert)
    assert news.kind is AlertKind.RECOVERED and news.alert_id == routed.alert.alert_id
    assert news.message.endswith("recovered")
