"""The notifier's shared types: what an alert is about (AlertKind, with its words in
KIND_TEXT), the alert as it is delivered (AlertMessage), one delivery of it to one channel
(Delivery), and the random source retries draw their jitter from (RandomSource).

Pure: no I/O, no clock. Whatever reads the outside (the alerts topic, a channel's
configuration, the clock) builds these and passes them in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Protocol
from uuid import UUID


class AlertKind(StrEnum):
    """What a job's notify rule may ask for (`spec.notify.on`). The values are what a spec
    names; everything else about a kind is in KIND_TEXT."""

    DEAD_LETTERED = "dead_lettered"
    FAILED = "failed"
    RECOVERED = "recovered"
    MISSED = "missed"
    TIMED_OUT = "timed_out"
    STARTED_LATE = "started_late"
    SET_ASIDE = "set_aside"


@dataclass(frozen=True)
class KindText:
    """How a kind reads: `event_type` is the webhook body's `type` (stable: receivers route
    on it), `title` a phrase for a Slack line or an e-mail subject, `one` and `many` what
    a digest counts ("1 more failure", "12 more failures")."""

    event_type: str
    title: str
    one: str
    many: str


KIND_TEXT: MappingProxyType[AlertKind, KindText] = MappingProxyType({
    AlertKind.DEAD_LETTERED: KindText("run.dead_lettered", "run dead-lettered",
                                      "dead letter", "dead letters"),
    AlertKind.FAILED: KindText("run.failed", "attempt failed", "failure", "failures"),
    AlertKind.RECOVERED: KindText("run.recovered", "run recovered", "recovery", "recoveries"),
    AlertKind.MISSED: KindText("job.missed", "fire time missed",
                               "missed fire time", "missed fire times"),
    AlertKind.TIMED_OUT: KindText("run.timed_out", "attempt timed out", "timeout", "timeouts"),
    AlertKind.STARTED_LATE: KindText("run.started_late", "run started late",
                                     "late start", "late starts"),
    AlertKind.SET_ASIDE: KindText("job.set_aside", "job set aside", "set-aside", "set-asides"),
})


@dataclass(frozen=True)
class AlertMessage:
    """One alert as the notifier delivers it. `digest_count` is 0 for an alert of its own,
    N for a digest that stands for N alerts the throttle held back (rules.Throttle).

    Texts are not bounded here: rendering bounds what it puts on the wire."""

    alert_id: UUID
    tenant: str
    kind: AlertKind
    job_id: UUID
    job_name: str
    run_id: UUID | None
    attempt: int | None
    message: str
    at: datetime
    digest_count: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, AlertKind):
            raise ValueError(f"alert kind: an AlertKind, not {self.kind!r}")
        if self.at.tzinfo is None:
            raise ValueError("alert at: a time with a zone (UTC), not a naive datetime")
        if self.attempt is not None and self.attempt < 1:
            raise ValueError(f"alert attempt: 1 or more, not {self.attempt}")
        if self.digest_count < 0:
            raise ValueError(f"alert digest_count: 0 or more, not {self.digest_count}")


@dataclass(frozen=True)
class Delivery:
    """One alert to one channel. `delivery_id` is the same on every attempt
    (retry_plan.delivery_id), so a receiver recognises a retry. `attempt` counts from 1;
    `first_at` is when attempt 1 was taken to be sent (None until then), `due_at` when this
    attempt may be sent."""

    delivery_id: UUID
    channel_id: UUID
    alert: AlertMessage
    due_at: datetime
    attempt: int = 1
    first_at: datetime | None = None

    @property
    def tenant(self) -> str:
        return self.alert.tenant


class RandomSource(Protocol):
    """A uniform draw in [0, 1): `random.Random` is one; tests pass a fixed sequence."""

    def random(self) -> float: ...
