"""The notifier's ports in memory (notifications/ports.py), and Alert records as an owner
writes them, for the notifier's unit tests."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from cronlog.domain.channel import ChannelKind
from cronlog.notifications.model import AttemptOutcome, AttemptRecord, ChannelTarget, Delivery
from cronlog.notifications.ports import ChannelEntry
from tests.support.notifications import T0, channel, sample_id


@dataclass
class Store:
    rows: dict[UUID, tuple[int, Delivery, str]] = field(default_factory=dict)
    failing: set[UUID] = field(default_factory=set)

    def add(self, partition: int, deliveries: Sequence[Delivery]) -> set[UUID]:
        new = {d.delivery_id for d in deliveries if d.delivery_id not in self.rows}
        for d in deliveries:
            self.rows.setdefault(d.delivery_id, (partition, d, "pending"))
        return new

    def pending(self, partitions: Collection[int], limit: int) -> list[tuple[int, Delivery]]:
        found = [(p, d) for p, d, status in self.rows.values()
                 if status == "pending" and p in partitions]
        return sorted(found, key=lambda pd: pd[1].due_at)[:limit]

    def attempted(self, delivery: Delivery, outcome: AttemptOutcome,
                  next_attempt_at: datetime | None) -> None:
        partition, _, _ = self.rows.get(delivery.delivery_id, (0, delivery, ""))
        status = "pending" if outcome is AttemptOutcome.RETRYING else outcome.value
        again = delivery if next_attempt_at is None else Delivery(
            delivery.delivery_id, delivery.channel_id, delivery.alert, next_attempt_at,
            delivery.attempt + 1, delivery.first_at)
        self.rows[delivery.delivery_id] = (partition, again, status)

    def set_failing(self, job_id: UUID, failing: bool, at: datetime) -> bool:
        was = job_id in self.failing
        (self.failing.add if failing else self.failing.discard)(job_id)
        return was


@dataclass
class Directory:
    entries: dict[tuple[str, str], tuple[ChannelEntry, bool]] = field(default_factory=dict)

    def add(self, tenant: str, name: str, default: bool = False) -> None:
        target = ChannelTarget(channel(tenant, name), tenant, ChannelKind.WEBHOOK,
                               f"https://{tenant}.example.com/{name}")
        self.entries[(tenant, name)] = (ChannelEntry(name, target), default)

    def delete(self, tenant: str, name: str) -> None:
        entry, _ = self.entries[(tenant, name)]
        self.entries[(tenant, name)] = (ChannelEntry(name, entry.target, deleted=True), False)

    def named(self, tenant: str, names: Sequence[str]) -> dict[str, ChannelEntry]:
        return {n: self.entries[(tenant, n)][0] for n in names
                if (tenant, n) in self.entries and not self.entries[(tenant, n)][0].deleted}

    def defaults(self, tenant: str) -> list[ChannelEntry]:
        return [e for (t, _), (e, d) in self.entries.items() if t == tenant and d]

    def by_id(self, channel_id: UUID) -> ChannelEntry | None:
        return next((e for e, _ in self.entries.values()
                     if e.target.channel_id == channel_id), None)


@dataclass
class Log:
    records: list[AttemptRecord] = field(default_factory=list)

    def record(self, attempts: Sequence[AttemptRecord]) -> None:
        self.records.extend(attempts)


def record(kind: str, tenant: str = "acme", notify: dict[str, Any] | None = None,
           run: int = 0, job: str = "nightly", **changes: Any) -> dict[str, Any]:
    return {"alert_id": sample_id("alert", tenant, kind, run), "tenant": tenant,
            "kind": kind, "job_id": sample_id("job", tenant, job), "job_name": job,
            "run_id": sample_id("run", tenant, run), "attempt": 2,
            "message": f"{kind} of run {run}", "at": T0, "notify": notify, **changes}


