"""Whether commands can be decided: every inbox partition has an owner that has caught up,
and the api's own way to the owners and back (its CommandPath) works.

An owner is the scheduler group member the log's coordinator assigned the partition to; it
has caught up when the partition's owner record names that member at the current epoch. A
stale record (an owner that died, or this process's predecessor) names another member, so
it never counts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from cronlog.commands.api.ports import CommandPath, GroupMember, OwnerRecord, OwnerRecords, SchedulerGroup
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.ports import LogUnavailable, StoreUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Readiness:
    partitions: int
    # Why each partition that cannot decide commands yet cannot.
    waiting: Mapping[int, str] = field(default_factory=dict)
    # What keeps every command from being decided, whatever its partition.
    blocked: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.waiting and not self.blocked

    def explain(self, partition: int) -> str:
        reason = self.waiting.get(partition)
        said = f"partition {partition}: {reason}" if reason else \
            f"partition {partition} has a caught-up scheduler"
        return "; ".join((said, *self.blocked))

    def summary(self, most: int = 8) -> str:
        if self.blocked:
            return "; ".join(self.blocked) + (f"; {self._owners(most)}" if self.waiting else "")
        return self._owners(most)

    def _owners(self, most: int) -> str:
        if not self.waiting:
            return f"all {self.partitions} inbox partitions have a caught-up scheduler"
        by_reason: dict[str, list[int]] = {}
        for partition in sorted(self.waiting):
            by_reason.setdefault(self.waiting[partition], []).append(partition)
        parts = []
        for reason, partitions in by_reason.items():
            named = ", ".join(str(p) for p in partitions[:most])
            more = f" and {len(partitions) - most} more" if len(partitions) > most else ""
            parts.append(f"partition{'s' if len(partitions) > 1 else ''} {named}{more}: "
                         f"{reason}")
        return (f"{len(self.waiting)} of {self.partitions} inbox partitions cannot decide "
                "commands yet; " + "; ".join(parts))


NO_SCHEDULER = "no scheduler holds it (none is running, or the group is rebalancing)"


def _layout(partitions: int | PartitionLayout) -> PartitionLayout:
    return partitions if isinstance(partitions, PartitionLayout) else \
        PartitionLayout.identity(partitions)


def readiness(partitions: int | PartitionLayout, members: Mapping[int, GroupMember],
              records: Mapping[int, OwnerRecord]) -> Readiness:
    """partitions: the layout (a count: the identity layout). Members are by inbox (Kafka)
    partition, records by logical partition: an inbox partition can decide commands once
    the record of every logical partition it carries names its member (each is caught up
    with the epoch its owner took, domain/partition_layout.py)."""
    layout = _layout(partitions)
    waiting: dict[int, str] = {}
    for partition in range(layout.kafka):
        member = members.get(partition)
        if member is None:
            waiting[partition] = NO_SCHEDULER
            continue
        for logical in layout.logicals_of(partition):
            record = records.get(logical)
            if record is None or record.caught_up_member != member.member_id:
                waiting[partition] = f"scheduler {member.scheduler} is catching up with the log"
                break
    return Readiness(layout.kafka, waiting)


def unknown(partitions: int | PartitionLayout, why: str) -> Readiness:
    kafka = _layout(partitions).kafka
    return Readiness(kafka, {p: f"not known ({why})" for p in range(kafka)})


class ReadinessWatch:
    """Re-reads readiness every interval on a thread of its own and reports each change of
    ready; explains, for a command that got no reply, what its partition was waiting for."""

    def __init__(self, partitions: int | PartitionLayout, group: SchedulerGroup,
                 records: OwnerRecords,
                 on_change: Callable[[bool], None], interval: float = 0.5,
                 log_every: float = 10.0, path: CommandPath | None = None) -> None:
        self._path = path
        self._partitions = partitions
        self._group = group
        self._records = records
        self._on_change = on_change
        self._interval = interval
        self._log_every = log_every
        self._current = unknown(partitions, "not read yet")
        self._reported: bool | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="readiness", daemon=True)

    @property
    def current(self) -> Readiness:
        return self._current

    def explain(self, partition: int) -> str:
        return self._current.explain(partition)

    def check(self) -> Readiness:
        try:
            found = readiness(self._partitions, self._group.members_by_partition(),
                              self._records.owner_records())
        except (LogUnavailable, StoreUnavailable) as exc:
            found = unknown(self._partitions, str(exc))
        if self._path is not None:
            found = replace(found, blocked=tuple(self._path.problems()))
        self._current = found
        if found.ready != self._reported:
            self._reported = found.ready
            self._on_change(found.ready)
        return found

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        logged_at = -self._log_every
        while not self._stop.is_set():
            was = self._reported
            found = self.check()
            now = time.monotonic()
            if found.ready != was or (not found.ready and now - logged_at >= self._log_every):
                log.log(logging.INFO if found.ready else logging.WARNING,
                        "commands %s: %s", "can be decided" if found.ready else "must wait",
                        found.summary())
                logged_at = now
            self._stop.wait(self._interval)
