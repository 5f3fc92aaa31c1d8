"""What a worker process announces of itself, and the bounds every announcement is held to.

The same bounds apply where an announcement is written and where it is read: the api keeps
what it reads in memory, and a worker of another version, or a record written by anyone
who can reach the topic, must not make one entry large (invariant 12)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

# A worker id or host name longer than this is cut: both are labels for people.
MAX_ID_CHARS = 200
MAX_HOST_CHARS = 255
MAX_VERSION_CHARS = 64
# More queues or handlers than this are not listed (a worker registers a few dozen
# handlers at most; one with more is told so in its own log, not here).
MAX_QUEUES = 64
MAX_HANDLERS = 256
MAX_NAME_CHARS = 128
MAX_SLOTS = 1_000_000


@dataclass(frozen=True)
class WorkerAnnouncement:
    """One worker process: the queues it serves, the handlers it offers in all of them,
    its slots (the sum over its queues) and how many run a handler right now."""

    worker_id: str
    host: str
    queues: tuple[str, ...]
    handlers: tuple[str, ...]
    slots: int
    slots_in_use: int
    version: str
    at: datetime

    def offers(self, queue: str, handler: str) -> bool:
        return queue in self.queues and handler in self.handlers


def _names(names: tuple[str, ...], most: int) -> tuple[str, ...]:
    return tuple(sorted({n[:MAX_NAME_CHARS] for n in names[:most * 2]}))[:most]


def bounded(announcement: WorkerAnnouncement) -> WorkerAnnouncement:
    """The announcement within the bounds: long texts cut, long lists shortened, counts
    clamped. At most twice MAX_HANDLERS names looked at, whatever the record holds."""
    a = announcement
    slots = min(max(a.slots, 0), MAX_SLOTS)
    return replace(a, worker_id=a.worker_id[:MAX_ID_CHARS], host=a.host[:MAX_HOST_CHARS],
                   queues=_names(a.queues, MAX_QUEUES), handlers=_names(a.handlers, MAX_HANDLERS),
                   slots=slots, slots_in_use=min(max(a.slots_in_use, 0), slots),
                   version=a.version[:MAX_VERSION_CHARS])
