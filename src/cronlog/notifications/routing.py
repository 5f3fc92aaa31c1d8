"""Which alert an Alert record is, and who gets it (docs/alerts.md, "Which alerts a job gets").

- A job-level fact (domain/notify_rule.py SERVES) about a job with a notify rule goes to the
  rule's channels if the rule wants its kind, and nowhere otherwise.
- A dead letter or a job set aside of a job without a rule goes to the tenant's default
  channels; the job's other facts are written only for jobs with a rule.
- A tenant-level fact (an unserved queue, the in-flight limit, a message set aside) goes to
  the tenant's default channels.
- A run that succeeded is an alert only after a dead letter of the same job: then it is
  that job's `recovered`; the notifier keeps which jobs are failing (Notifier).
- A record of a kind this notifier does not know is left alone, not an error: a newer owner
  may write facts an older notifier has no words for.

An Alert record written before alert ids (v1) gets one derived from where it was read, so
that the same record read again is the same alert.

Pure: the record comes decoded; nothing is read or written here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid5

from cronlog.domain.notify_rule import SERVES, AlertFact, AlertKind
from cronlog.notifications.model import AlertMessage, AnyKind, TenantAlert

V1_NAMESPACE = UUID("0f6b2d4e-3a51-4c7d-9e80-1b2c3d4e5f60")

_TENANT_FACTS: Mapping[AlertFact, TenantAlert] = {
    AlertFact.QUEUE_UNSERVED: TenantAlert.QUEUE_UNSERVED,
    AlertFact.TENANT_IN_FLIGHT_LIMIT: TenantAlert.IN_FLIGHT_LIMIT,
    AlertFact.MESSAGE_SET_ASIDE: TenantAlert.MESSAGE_SET_ASIDE,
}
# Without a rule, these still reach the tenant's default channels.
_DEFAULTED = frozenset({AlertFact.RUN_DEAD_LETTERED, AlertFact.JOB_SET_ASIDE})


@dataclass(frozen=True)
class RoutedAlert:
    """An alert and its audience: the rule's channels by name, or (`channels` None) the
    tenant's default channels. `fact` is what the owner wrote; a RUN_SUCCEEDED alert is sent
    only if the job was failing, as `recovered`."""

    alert: AlertMessage
    fact: AlertFact
    channels: tuple[str, ...] | None


def route(record: Mapping[str, Any], where: str) -> RoutedAlert | None:
    """The alert a record is and who gets it; None when nobody does. `where` names the
    record's place in the log (topic, partition, offset), for a v1 record's id."""
    try:
        fact = AlertFact(record["kind"])
    except ValueError:
        return None
    rule = record.get("notify")
    kind: AnyKind
    if fact in _TENANT_FACTS:
        kind, channels = _TENANT_FACTS[fact], None
    else:
        kind = SERVES[fact]
        if rule is not None:
            if kind.value not in rule["on"]:
                return None
            channels = tuple(rule["channels"])
        elif fact in _DEFAULTED:
            channels = None
        else:
            return None
    alert_id = record.get("alert_id")
    message = AlertMessage(
        alert_id=UUID(str(alert_id)) if alert_id is not None else uuid5(V1_NAMESPACE, where),
        tenant=record["tenant"], kind=kind, job_id=UUID(str(record["job_id"])),
        job_name=record.get("job_name") or "",
        run_id=UUID(str(record["run_id"])) if record.get("run_id") else None,
        attempt=_attempt(record.get("attempt")), message=record["message"], at=record["at"])
    return RoutedAlert(message, fact, channels)


def _attempt(value: object) -> int | None:
    return value if isinstance(value, int) and value >= 1 else None


def recovered(alert: AlertMessage) -> AlertMessage:
    """A job's success after its dead letter, as the alert its rule asked for."""
    return AlertMessage(alert.alert_id, alert.tenant, AlertKind.RECOVERED, alert.job_id,
                        alert.job_name, alert.run_id, alert.attempt,
                        f"{alert.message} after a dead letter: recovered", alert.at)
