"""A channel's events as changes to the `channels` table (issue 37): what the state
projection hands its writer for each ChannelCreated/Updated/SecretRotated/Deleted, on the
owner's apply and on catch-up and replay alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.domain.catalogue import ChannelEvent
from cronlog.domain.ids import as_uuid

CHANNEL_EVENTS = frozenset(ChannelEvent)
# What each event sets besides the version and time, as the table names it.
_FIELDS: dict[str, tuple[str, ...]] = {
    ChannelEvent.CREATED: ("kind", "target", "recipients", "description", "is_default"),
    ChannelEvent.UPDATED: ("target", "recipients", "description", "is_default"),
    ChannelEvent.SECRET_ROTATED: ("secret_rotation",),
    ChannelEvent.DELETED: (),
    ChannelEvent.RESTORED: ("kind", "target", "recipients", "description", "is_default",
                            "secret_rotation")}


@dataclass(frozen=True)
class ChannelChange:
    """One channel event for the table: applied only over an older version."""

    event: str
    channel_id: UUID
    partition: int
    tenant: str
    name: str
    version: int
    at: datetime
    values: Mapping[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        return {"channel_id": self.channel_id, "partition": self.partition,
                "tenant": self.tenant, "name": self.name, "version": self.version,
                "at": self.at, **self.values}


def channel_change(partition: int, name: str, record: Mapping[str, Any]) -> ChannelChange:
    values: dict[str, Any] = {}
    for key in _FIELDS[name]:
        value = record.get(key)
        if key == "recipients":
            value = [str(v) for v in value or ()]
        elif key in ("target", "description", "kind"):
            value = str(value or "")
        elif key == "is_default":
            value = bool(value)
        elif key == "secret_rotation":
            value = int(value or 0)
        values[key] = value
    return ChannelChange(event=name, channel_id=as_uuid(record["channel_id"]),
                         partition=partition, tenant=str(record["tenant"]),
                         name=str(record["name"]), version=int(record["version"]),
                         at=record["at"], values=values)
