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
    """A tenant with an allow-list may use only what it lists (its list is the whole of it,
    in either mode). A tenant without one may use, when the api runs open (`closed` False),
    every declared queue and any handler; when it runs with tenant tokens (`closed`), only
    the shared queues and handlers, so that no tenant reaches another's queue or handler
    unless the operator said so (DESIGN invariant 10, docs/security.md)."""

    queues: frozenset[str]
    tenant_queues: Mapping[str, frozenset[str]] = field(default_factory=dict)
    tenant_handlers: Mapping[str, frozenset[str]] = field(default_factory=dict)
    closed: bool = False
    shared_queues: frozenset[str] = frozenset()
    shared_handlers: frozenset[str] = frozenset()

    @classmethod
    def of(cls, queues: Iterable[str], tenant_queues: Mapping[str, Iterable[str]] | None = None,
           tenant_handlers: Mapping[str, Iterable[str]] | None = None, *, closed: bool = False,
           shared_queues: Iterable[str] = (), shared_handlers: Iterable[str] = ()
           ) -> DeclaredQueues:
        return cls(frozenset(queues), _frozen(tenant_queues or {}),
                   _frozen(tenant_handlers or {}), closed, frozenset(shared_queues),
                   frozenset(shared_handlers))

    def allowed_queues(self, tenant: str) -> frozenset[str] | None:
        """The declared queues this tenant may use; None: every declared one."""
        listed = self.tenant_queues.get(tenant)
        if listed is None and self.closed:
            return self.shared_queues
        return listed

    def allowed_handlers(self, tenant: str) -> frozenset[str] | None:
        """The handlers this tenant may name; None: any."""
        listed = self.tenant_handlers.get(tenant)
        if listed is None and self.closed:
            return self.shared_handlers
        return listed

    def check(self, spec: JobSpec) -> None:
        # One answer whether the queue is undeclared, another tenant's or only closed to this
        # tenant, and no list of what exists: a tenant learns nothing about other tenants'
        # queues and handlers.
        allowed = self.allowed_queues(spec.tenant)
        if spec.queue not in self.queues or (allowed is not None and spec.queue not in allowed):
            raise InvalidSpec("spec.queue", f"queue {spec.queue!r} is not a queue this tenant "
                              "may use; queues are declared by the operator, not created by "
                              "requests")
        handlers = self.allowed_handlers(spec.tenant)
        if handlers is not None and spec.handler not in handlers:
            raise InvalidSpec("spec.handler", f"handler {spec.handler!r} is not a handler "
                              "this tenant may use")
