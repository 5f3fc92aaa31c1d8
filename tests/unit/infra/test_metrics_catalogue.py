"""The metrics catalogue: Prometheus naming conventions, every metric buildable in its
roles' registries and absent from the others, and every metric the alert rules and the
operations docs name declared in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from cronlog.infra.observability.catalogue import (
    CATALOGUE,
    ROLES,
    START_LAG_SLO_SECONDS,
    WORKER_START_LAG,
    by_name,
    for_role,
)
from cronlog.infra.observability.registry import NotThisRolesMetric, RoleMetrics

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "cronlog-rules.yml"
NAME = re.compile(r"^cronlog_[a-z][a-z0-9_]*[a-z0-9]$")
UNIT_SUFFIXES = ("_seconds", "_messages", "_events", "_runs", "_slots", "_dispatches",
                 "_partitions", "_pending", "_up", "_ready")
HISTOGRAM_SERIES = re.compile(r"_(bucket|sum|count)$")


def test_names_follow_prometheus_conventions() -> None:
    assert len(by_name()) == len(CATALOGUE), "a name declared twice"
    for spec in CATALOGUE:
        assert NAME.match(spec.name), spec.name
        assert spec.help.strip(), spec.name
        if spec.kind == "counter":
            assert spec.name.endswith("_total"), spec.name
        else:
            assert not spec.name.endswith("_total"), spec.name
        if spec.kind == "histogram":
            assert spec.buckets == tuple(sorted(spec.buckets)) and spec.buckets, spec.name
            assert spec.name.endswith(UNIT_SUFFIXES), spec.name
        else:
            assert not spec.buckets, spec.name
        # Base units only.
        assert not re.search(r"_(milliseconds|ms|minutes|hours|kilobytes)(_|$)", spec.name)
        assert all(re.fullmatch(r"[a-z][a-z_]*", label) for label in spec.labels)
        assert "le" not in spec.labels and "quantile" not in spec.labels


def test_the_start_lag_slo_is_a_bucket_edge() -> None:
    assert START_LAG_SLO_SECONDS == 2.0
    assert START_LAG_SLO_SECONDS in WORKER_START_LAG.buckets


@pytest.mark.parametrize("role", ROLES)
def test_every_metric_of_a_role_is_exported_with_the_default_collectors(role: str) -> None:
    metrics = RoleMetrics(role)  # type: ignore[arg-type]
    for spec in for_role(role):  # type: ignore[arg-type]
        if spec.labels:
            continue  # a labelled metric shows no series until it has a label value
        getattr(metrics, spec.kind)(spec)
    text = generate_latest(metrics.registry).decode()
    assert "process_cpu_seconds_total" in text and "python_info" in text
    for spec in for_role(role):  # type: ignore[arg-type]
        if not spec.labels:
            assert f"# HELP {spec.name} " in text


def test_a_role_cannot_wire_another_roles_metric() -> None:
    with pytest.raises(NotThisRolesMetric, match="cronlog_worker_start_lag_seconds"):
        RoleMetrics("scheduler", default_collectors=False).histogram(WORKER_START_LAG)


def test_roles_have_registries_of_their_own() -> None:
    first, second = RoleMetrics("worker"), RoleMetrics("worker")
    first.histogram(WORKER_START_LAG).labels("q").observe(0.1)
    second.histogram(WORKER_START_LAG).labels("q").observe(0.2)
    assert first.registry.get_sample_value(
        "cronlog_worker_start_lag_seconds_sum", {"queue": "q"}) == pytest.approx(0.1)


def metric_names_in(text: str) -> set[str]:
    return {HISTOGRAM_SERIES.sub("", n) for n in re.findall(r"\bcronlog_[a-z0-9_]+", text)}


def test_every_metric_the_alert_rules_name_is_in_the_catalogue() -> None:
    named = metric_names_in(RULES.read_text())
    assert named, "the rules name no cronlog metric"
    histograms = {s.name for s in CATALOGUE if s.kind == "histogram"}
    for name in named:
        assert name in by_name() or name in histograms, f"{name} is not in the catalogue"


def test_every_metric_is_described_in_the_operations_docs_and_none_that_is_not() -> None:
    docs = (ROOT / "docs" / "operations.md").read_text()
    monitoring = docs[docs.index("## Monitoring"):]
    for spec in CATALOGUE:
        assert f"`{spec.name}`" in monitoring, f"{spec.name} is not documented"
    assert metric_names_in(monitoring) <= set(by_name()), "the docs name an unknown metric"
