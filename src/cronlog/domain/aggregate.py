"""The base of cronlog's aggregates: eventsourcing's Aggregate, with time always passed in."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Self
from uuid import UUID

from eventsourcing.domain import Aggregate

from cronlog.domain.errors import ClockReadForbidden


class CronlogAggregate(Aggregate):
    class Event(Aggregate.Event):
        @staticmethod
        def create_timestamp() -> datetime:
            # Invariant 7: every event gets the time its command or cycle was given.
            raise ClockReadForbidden("an event was created without an explicit timestamp")

    @classmethod
    def restore(cls, aggregate_id: UUID, version: int, created_on: datetime,
                modified_on: datetime, **state: Any) -> Self:
        """Rebuilds an aggregate from a projection row (a snapshot), with no new event."""
        aggregate = object.__new__(cls)
        aggregate._id = aggregate_id
        aggregate._version = version
        aggregate._created_on = created_on
        aggregate._modified_on = modified_on
        aggregate._pending_events = []
        for name, value in state.items():
            setattr(aggregate, name, value)
        return aggregate
