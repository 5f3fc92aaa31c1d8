"""The queues and handlers operators declared, and which of them each tenant may use.

A request never creates a queue: its dispatch topic is made by `cronlog provision` from the
declared list, so no tenant can grow the deployment's topics (DESIGN invariant 10).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cronlog.domain.errors import InvalidSpec
from cronlog.domain.spec import JobSpec


def _frozen(allow_lists: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    return {tenant: frozenset(names) for tenant, names in allow_lists.items()}


@dataclass(frozen=True)
class DeclaredQueues:
    """A tenant with an allow-list may use only what it lists; a tenant without one may use
    every declared queue and any handler."""

    queues: frozenset[str]
    tenant_queues: Mapping[str, frozenset[str]] = field(default_factory=dict)
    tenant_handlers: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, queues: Iterable[str], tenant_queues: Mapping[str, Iterable[str]] | None = None,
           tenant_handlers: Mapping[str, Iterable[str]] | None = None) -> DeclaredQueues:
        return cls(frozenset(queues), _frozen(tenant_queues or {}),
                   _frozen(tenant_handlers or {}))

    def check(self, spec: JobSpec) -> None:
        # One answer whether the queue is undeclared or only closed to this tenant, and no
        # list of what exists: a tenant learns nothing about other tenants' queues.
        allowed = self.tenant_queues.get(spec.tenant)
        if spec.queue not in self.queues or (allowed is not None and spec.queue not in allowed):
            raise InvalidSpec("spec.queue", f"queue {spec.queue!r} is not a queue this tenant "
                              "may use; queues are declared by the operator, not created by "
                              "requests")
        handlers = self.tenant_handlers.get(spec.tenant)
        if handlers is not None and spec.handler not in handlers:
            raise InvalidSpec("spec.handler", f"handler {spec.handler!r} is not a handler "
                              "this tenant may use")
