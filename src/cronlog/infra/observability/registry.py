"""A role's metrics: the catalogue's specs made into prometheus-client objects in the role's
own CollectorRegistry.

Each role process gets a CollectorRegistry of its own, not the library's global default:
tests build several roles (and several of one role) in one Python process, and a global
registry would refuse the second set or mix their numbers; a library that registers in the
default registry cannot slip series into cronlog's /metrics either. The default collectors
(process CPU, memory and file descriptors, Python's version, the garbage collector) are
registered into it explicitly, so /metrics has them as the client's default would."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from cronlog.infra.observability.catalogue import MetricSpec, Role


class NotThisRolesMetric(ValueError):
    """A role wired a metric the catalogue gives to another role."""


class RoleMetrics:
    def __init__(self, role: Role, default_collectors: bool = True) -> None:
        self.role = role
        self.registry = CollectorRegistry()
        if default_collectors:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        self._made: dict[str, Any] = {}

    def _check(self, spec: MetricSpec, kind: str) -> None:
        if spec.kind != kind:
            raise TypeError(f"{spec.name} is a {spec.kind}, not a {kind}")
        if not spec.exported_by(self.role):
            raise NotThisRolesMetric(f"{spec.name} belongs to {', '.join(spec.roles)}, "
                                     f"not the {self.role}")

    def counter(self, spec: MetricSpec) -> Counter:
        self._check(spec, "counter")
        if spec.name not in self._made:
            # prometheus-client adds `_total` itself (and `_created`).
            self._made[spec.name] = Counter(spec.name.removesuffix("_total"), spec.help,
                                            spec.labels, registry=self.registry)
        made: Counter = self._made[spec.name]
        return made

    def gauge(self, spec: MetricSpec) -> Gauge:
        self._check(spec, "gauge")
        if spec.name not in self._made:
            self._made[spec.name] = Gauge(spec.name, spec.help, spec.labels,
                                          registry=self.registry)
        made: Gauge = self._made[spec.name]
        return made

    def histogram(self, spec: MetricSpec) -> Histogram:
        self._check(spec, "histogram")
        if spec.name not in self._made:
            self._made[spec.name] = Histogram(spec.name, spec.help, spec.labels,
                                              registry=self.registry, buckets=spec.buckets)
        made: Histogram = self._made[spec.name]
        return made

    def add_collector(self, collector: Collector) -> None:
        """Numbers read when scraped (gauges of state another object holds)."""
        self.registry.register(collector)


def gauge_family(spec: MetricSpec, samples: Iterable[tuple[Sequence[str], float]]
                 ) -> GaugeMetricFamily:
    """A gauge of the catalogue for a collector that reads its numbers at scrape time."""
    if spec.kind != "gauge":
        raise TypeError(f"{spec.name} is a {spec.kind}, not a gauge")
    family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
    for labels, value in samples:
        family.add_metric(list(labels), value)
    return family

