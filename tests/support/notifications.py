"""What the notifier's unit tests share (tests/unit/notifications): alerts and deliveries
with defaults, a random source answering fixed draws."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from itertools import cycle
from typing import Any
from uuid import UUID, uuid5

from cronlog.domain.notify_rule import AlertKind
from cronlog.notifications.model import AlertMessage, AnyKind, Delivery
from cronlog.notifications.retry_plan import first_delivery

T0 = datetime(2026, 12, 6, 14, 2, 11, tzinfo=UTC)
SAMPLE_NAMESPACE = UUID("2f0c6a4e-1d3b-4c5a-9e8f-7b6a5c4d3e2f")


def sample_id(*parts: object) -> UUID:
    """A fixed id named by its parts: sample_id("job", "acme", 1)."""
    return uuid5(SAMPLE_NAMESPACE, "\x00".join(map(str, parts)))


def alert(tenant: str = "acme", kind: AnyKind = AlertKind.DEAD_LETTERED, n: int = 0,
          **changes: Any) -> AlertMessage:
    """Alert `n` of the tenant: its own alert id, the tenant's job "nightly"."""
    fields: dict[str, Any] = {
        "alert_id": sample_id("alert", tenant, n), "tenant": tenant, "kind": kind,
        "job_id": sample_id("job", tenant), "job_name": "nightly",
        "run_id": sample_id("run", tenant, n), "attempt": 3,
        "message": "exit status 1", "at": T0}
    fields.update(changes)
    return AlertMessage(**fields)


def channel(tenant: str, name: str | int = 0) -> UUID:
    return sample_id("channel", tenant, name)


def delivery(tenant: str = "acme", n: int = 0, to: str | int = 0,
             due_at: datetime = T0) -> Delivery:
    """Alert `n` of the tenant to its channel `to`, due at `due_at`."""
    return first_delivery(alert(tenant, n=n), channel(tenant, to), due_at)


class Draws:
    """A random source that answers the given draws in turn, over and over."""

    def __init__(self, draws: Iterable[float]) -> None:
        self._draws = cycle(list(draws))

    def random(self) -> float:
        return next(self._draws)
