"""What a job wants to be told, and where: its notify rule (`spec.notify`, issue 37).

A rule names 1 to MAX_CHANNELS_PER_JOB of the tenant's channels (by domain/channel.py's
CHANNEL_NAME_PATTERN), the kinds of alert it wants (`on`, from AlertKind; dead_lettered
alone when it names none), and for started_late how late a start is late (`late_after`,
one second to one day; a minute when not given). Anything else is refused with InvalidSpec
naming the field. Whether the channels exist is the api's question (they live on their own
partitions); a delivery to one deleted since fails, recorded, in the notifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from cronlog.domain.bounds import CHANNEL_NAME_PATTERN
from cronlog.domain.errors import InvalidSpec


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


MAX_CHANNELS_PER_JOB = 5
DEFAULT_ON: tuple[AlertKind, ...] = (AlertKind.DEAD_LETTERED,)
_KIND_NAMES = frozenset(kind.value for kind in AlertKind)
CHANNELS_FIELD = "spec.notify.channels"
ON_FIELD = "spec.notify.on"

LATE_AFTER_FIELD = "spec.notify.late_after"
DEFAULT_LATE_AFTER = timedelta(minutes=1)
SHORTEST_LATE_AFTER = timedelta(seconds=1)
LONGEST_LATE_AFTER = timedelta(days=1)


@dataclass(frozen=True)
class NotifyRule:
    """A job's `spec.notify`, validated: the channels it names (in the spec's order) and the
    kinds of alert it wants."""

    channels: tuple[str, ...]
    on: frozenset[AlertKind]
    # started_late: a start this much after the run's time is late.
    late_after: timedelta = DEFAULT_LATE_AFTER

    def wants(self, kind: AlertKind) -> bool:
        return kind in self.on


def notify_rule(channels: Sequence[str], on: Sequence[str] | None = None,
                late_after: timedelta | None = None) -> NotifyRule:
    """The rule a spec's `notify` describes, or InvalidSpec naming the field at fault.
    `on` None (not given) is DEFAULT_ON; `late_after` None is DEFAULT_LATE_AFTER. Cost:
    O(channels + kinds), each bounded first."""
    if isinstance(channels, str) or not 1 <= len(channels) <= MAX_CHANNELS_PER_JOB:
        count = "a string" if isinstance(channels, str) else str(len(channels))
        raise InvalidSpec(CHANNELS_FIELD, f"name 1 to {MAX_CHANNELS_PER_JOB} channels, "
                                          f"not {count}")
    for index, name in enumerate(channels):
        if not isinstance(name, str) or not CHANNEL_NAME_PATTERN.fullmatch(name):
            raise InvalidSpec(f"{CHANNELS_FIELD}[{index}]",
                              f"channel name {str(name)[:40]!r} must match "
                              f"{CHANNEL_NAME_PATTERN.pattern}")
        if name in channels[:index]:
            raise InvalidSpec(f"{CHANNELS_FIELD}[{index}]", f"channel {name!r} is named twice")
    kinds = _kinds(on)
    if late_after is None:
        late_after = DEFAULT_LATE_AFTER
    if not SHORTEST_LATE_AFTER <= late_after <= LONGEST_LATE_AFTER:
        raise InvalidSpec(LATE_AFTER_FIELD, f"{SHORTEST_LATE_AFTER.total_seconds():.0f}s to "
                                            f"{LONGEST_LATE_AFTER.total_seconds():.0f}s, not "
                                            f"{late_after.total_seconds()}s")
    return NotifyRule(tuple(channels), kinds, late_after)


def _kinds(on: Sequence[str] | None) -> frozenset[AlertKind]:
    if on is None:
        return frozenset(DEFAULT_ON)
    known = ", ".join(kind.value for kind in AlertKind)
    if isinstance(on, str) or not 1 <= len(on) <= len(AlertKind):
        count = "a string" if isinstance(on, str) else str(len(on))
        raise InvalidSpec(ON_FIELD, f"name 1 to {len(AlertKind)} kinds of alert ({known}), "
                                    f"not {count}")
    kinds: list[AlertKind] = []
    for index, name in enumerate(on):
        if not isinstance(name, str) or name not in _KIND_NAMES:
            raise InvalidSpec(ON_FIELD, f"unknown kind of alert {str(name)[:40]!r} at "
                                        f"[{index}]; one of {known}")
        kind = AlertKind(name)
        if kind in kinds:
            raise InvalidSpec(ON_FIELD, f"kind {name!r} is named twice")
        kinds.append(kind)
    return frozenset(kinds)


class AlertFact(StrEnum):
    """What an owner says happened, on `<prefix>alerts` (the Alert record's `kind`): read by
    the notifier, which delivers the facts a job's rule wants (SERVES) to its channels and
    the others to the tenant's default channels (docs/alerts.md)."""

    RUN_DEAD_LETTERED = "run_dead_lettered"
    ATTEMPT_FAILED = "attempt_failed"
    ATTEMPT_TIMED_OUT = "attempt_timed_out"
    RUN_STARTED_LATE = "run_started_late"
    # Only for a job whose rule wants `recovered`: the notifier knows whether the job's
    # runs had been failing, the owner does not keep it.
    RUN_SUCCEEDED = "run_succeeded"
    FIRE_TIMES_MISSED = "fire_times_missed"
    JOB_SET_ASIDE = "job_set_aside"
    # Tenant-level: to the tenant's default channels.
    MESSAGE_SET_ASIDE = "message_set_aside"
    TENANT_IN_FLIGHT_LIMIT = "tenant_in_flight_limit"
    QUEUE_UNSERVED = "queue_unserved"


# The kind of a job's rule each job-level fact serves.
SERVES: dict[AlertFact, AlertKind] = {
    AlertFact.RUN_DEAD_LETTERED: AlertKind.DEAD_LETTERED,
    AlertFact.ATTEMPT_FAILED: AlertKind.FAILED,
    AlertFact.ATTEMPT_TIMED_OUT: AlertKind.TIMED_OUT,
    AlertFact.RUN_STARTED_LATE: AlertKind.STARTED_LATE,
    AlertFact.RUN_SUCCEEDED: AlertKind.RECOVERED,
    AlertFact.FIRE_TIMES_MISSED: AlertKind.MISSED,
    AlertFact.JOB_SET_ASIDE: AlertKind.SET_ASIDE,
}
