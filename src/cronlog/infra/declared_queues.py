"""The queues and handlers each tenant may use, as the settings declare them: the api checks
every create and update against them, and the owners check them again."""

from __future__ import annotations

from cronlog.commands.queue_catalog import DeclaredQueues
from cronlog.infra.config import Settings


def declared_queues(settings: Settings) -> DeclaredQueues:
    """Closed to what each tenant was given, or shared, when the api runs with tokens."""
    return DeclaredQueues.of(settings.queues, settings.tenant_queues, settings.tenant_handlers,
                             closed=bool(settings.tenant_tokens),
                             shared_queues=settings.shared_queues,
                             shared_handlers=settings.shared_handlers)
