"""Domain events and specs to and from the record dicts of the Avro schemas."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from uuid import UUID

from cronlog.domain.catalogue import CalendarEvent, ChannelEvent, JobEvent, RunEvent
from cronlog.domain.dependency import Dependency, DependencyCondition
from cronlog.domain.exclusions import DateRange, Exclusions
from cronlog.domain.job import Job
from cronlog.domain.notify_rule import AlertKind, NotifyRule, notify_rule
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy, RetryPolicy
from cronlog.domain.run import Run
from cronlog.domain.spec import JobSpec

_BASE_ATTRIBUTES = {"originator_id", "originator_version", "timestamp", "originator_topic"}


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


def _every(schedule: Mapping[str, Any]) -> timedelta | None:
    # Records written before interval jobs (older schema versions) have no every_ms.
    every_ms = schedule.get("every_ms")
    if schedule["kind"] != "every" or every_ms is None:
        return None
    return timedelta(milliseconds=every_ms)


def exclusions_to_record(exclusions: Exclusions) -> list[dict[str, Any]]:
    return [{"first": r.first, "last": r.last} for r in exclusions.ranges]


def exclusions_from_record(records: Any) -> Exclusions:
    """Left as read (older records have none): validation refuses bad ones, naming the
    field."""
    return Exclusions(tuple(DateRange(r["first"], r["last"]) for r in records or ()))


def spec_to_record(spec: JobSpec) -> dict[str, Any]:
    policy = spec.retry_policy
    return {
        "name": spec.name, "tenant": spec.tenant, "queue": spec.queue, "handler": spec.handler,
        "payload": spec.payload,
        "schedule": {"kind": _kind(spec), "cron": spec.cron, "at": spec.at,
                     "every_ms": None if spec.every is None
                     else spec.every // timedelta(milliseconds=1)},
        "time_zone": spec.time_zone, "start_at": spec.start_at, "end_at": spec.end_at,
        "timeout_ms": _ms(spec.timeout), "heartbeat_timeout_ms": _ms(spec.heartbeat_timeout),
        "retry_policy": {
            "max_attempts": policy.max_attempts,
            "initial_backoff_ms": _ms(policy.initial_backoff),
            "max_backoff_ms": _ms(policy.max_backoff), "coefficient": policy.coefficient,
            "jitter": policy.jitter, "non_retryable_errors": list(policy.non_retryable_errors),
        },
        "misfire_policy": str(spec.misfire_policy), "overlap_policy": str(spec.overlap_policy),
        "labels": dict(spec.labels),
        "spread_ms": _ms(spec.spread),
        "start_timeout_ms": None if spec.start_timeout is None else _ms(spec.start_timeout),
        "after": None if spec.after is None else {
            "job_ids": list(spec.after.job_ids), "condition": str(spec.after.condition),
            "wait_window_ms": _ms(spec.after.wait_window)},
        "exclusions": exclusions_to_record(spec.exclusions), "calendar": spec.calendar,
        "notify": None if spec.notify is None else notify_to_record(spec.notify),
    }


def notify_to_record(rule: NotifyRule) -> dict[str, Any]:
    # Kinds in AlertKind's order: the same rule is always the same record (request digests).
    return {"channels": list(rule.channels),
            "on": [kind.value for kind in AlertKind if kind in rule.on],
            "late_after_ms": _ms(rule.late_after)}


def notify_from_record(record: Mapping[str, Any] | None) -> NotifyRule | None:
    """Checked as read (InvalidSpec naming the field): a NotifyRule holds known kinds only.
    Records written before notify rules have none."""
    if record is None:
        return None
    return notify_rule(list(record["channels"]), list(record["on"]),
                       _optional_ms(record.get("late_after_ms")))


def _kind(spec: JobSpec) -> str:
    if spec.after is not None:
        return "after"
    if spec.every is not None:
        return "every"
    return "cron" if spec.cron is not None else "at"


def _dependency_from_record(record: Mapping[str, Any] | None) -> Dependency | None:
    if record is None:
        return None
    # Left as read: validate_spec refuses a bad one, naming the field.
    return Dependency(
        job_ids=tuple(u if isinstance(u, UUID) else _uuid_or_text(u) for u in record["job_ids"]),
        condition=_condition(record["condition"]),
        wait_window=timedelta(milliseconds=record["wait_window_ms"]))


def _uuid_or_text(value: Any) -> Any:
    try:
        return UUID(str(value))
    except ValueError:
        return value


def _condition(value: str) -> Any:
    try:
        return DependencyCondition(value)
    except ValueError:
        return value


def spec_from_record(record: Mapping[str, Any]) -> JobSpec:
    schedule = record["schedule"]
    policy = record["retry_policy"]
    return JobSpec(
        name=record["name"], tenant=record["tenant"], queue=record["queue"],
        handler=record["handler"], payload=bytes(record["payload"]),
        cron=schedule.get("cron") if schedule["kind"] == "cron" else None,
        at=schedule.get("at") if schedule["kind"] == "at" else None,
        every=_every(schedule),
        time_zone=record["time_zone"], start_at=record.get("start_at"),
        end_at=record.get("end_at"), timeout=timedelta(milliseconds=record["timeout_ms"]),
        heartbeat_timeout=timedelta(milliseconds=record["heartbeat_timeout_ms"]),
        retry_policy=RetryPolicy(
            max_attempts=policy["max_attempts"],
            initial_backoff=timedelta(milliseconds=policy["initial_backoff_ms"]),
            max_backoff=timedelta(milliseconds=policy["max_backoff_ms"]),
            coefficient=policy["coefficient"], jitter=policy["jitter"],
            non_retryable_errors=tuple(policy.get("non_retryable_errors") or ()),
        ),
        misfire_policy=MisfirePolicy(record["misfire_policy"]),
        overlap_policy=OverlapPolicy(record["overlap_policy"]),
        labels=dict(record.get("labels") or {}),
        spread=timedelta(milliseconds=record.get("spread_ms", 0)),
        start_timeout=_optional_ms(record.get("start_timeout_ms")),
        after=_dependency_from_record(record.get("after")),
        exclusions=exclusions_from_record(record.get("exclusions")),
        calendar=record.get("calendar"),
        notify=notify_from_record(record.get("notify")),
    )


def _optional_ms(value: int | None) -> timedelta | None:
    return None if value is None else timedelta(milliseconds=value)


_JOB_EVENTS = frozenset(JobEvent)
_CALENDAR_EVENTS = frozenset(CalendarEvent)
_CHANNEL_EVENTS = frozenset(ChannelEvent)
_RUN_EVENTS = frozenset(RunEvent)


class UnmappedEvent(TypeError):
    """A domain event that has no record form."""


def event_to_record(event: object) -> tuple[str, dict[str, Any]]:
    """The Avro record name and fields of a Job or Run domain event."""
    # By the catalogue's names, not the defining class: some of the Job's events are
    # defined by its base classes (domain/job_dependencies.py).
    name = type(event).__name__
    attributes = vars(event)
    fields = {k: v for k, v in attributes.items() if k not in _BASE_ATTRIBUTES}
    common: dict[str, Any] = {"version": attributes["originator_version"],
                              "at": attributes["timestamp"]}
    if name in _JOB_EVENTS:
        common["job_id"] = attributes["originator_id"]
        common.setdefault("request_id", None)
    elif name in _CALENDAR_EVENTS:
        common["calendar_id"] = attributes["originator_id"]
        fields.pop("calendar_id", None)
    elif name in _CHANNEL_EVENTS:
        # A channel's (issue 37): its id, its tenant and name in each; no secret in any.
        common["channel_id"] = attributes["originator_id"]
        fields.pop("channel_id", None)
        if "kind" in fields:
            fields["kind"] = str(fields["kind"])
    elif name in _RUN_EVENTS:
        common["run_id"] = attributes["originator_id"]
    else:
        raise UnmappedEvent(f"{type(event).__qualname__} is not a Job, Calendar, Channel "
                            "or Run event")
    record = {**common, **fields}
    for key in ("upstream_run_ids", "dependents", "recipients"):
        if key in record:
            record[key] = list(record[key])
    if "spec" in record and isinstance(record["spec"], JobSpec):
        record["spec"] = spec_to_record(record["spec"])
    if isinstance(record.get("exclusions"), Exclusions):
        record["exclusions"] = exclusions_to_record(record["exclusions"])
    return name, record


class AvroEventRecords:
    """The owner's view of the mapping (commands.partition_owner.EventRecords)."""

    def to_record(self, event: object) -> tuple[str, dict[str, Any]]:
        return event_to_record(event)

    def spec_from_record(self, record: Mapping[str, Any]) -> JobSpec:
        return spec_from_record(record)


class _LeavesAggregate:
    """Replays a record that changes no aggregate: a JobRequestApplied only takes a request
    id on its job, which stays as it was."""

    def mutate(self, aggregate: Any) -> Any:
        return aggregate


# Records on the job-events topic that are not events of the Job aggregate: a calendar's
# and a channel's (keyed by their ids) leave every job as it was.
NOT_AGGREGATE_EVENTS = frozenset({JobEvent.REQUEST_APPLIED, *CalendarEvent, *ChannelEvent})


_UUID_FIELDS = ("job_id", "run_id", "dependent_job_id", "upstream_job_id", "upstream_run_id")


def _event_class(owner: type[Any], name: str) -> Any:
    """The event class `name` of an aggregate, where its @event method is defined.
    eventsourcing also gives a subclass a copy of each event class it inherits (the Job's
    from domain/job_dependencies.py), which cannot apply itself: the base-most is the one."""
    for klass in reversed(owner.__mro__):
        found = klass.__dict__.get(name)
        if found is not None:
            return found
    return None


def record_to_event(name: str, record: Mapping[str, Any]) -> Any:
    """The domain event of a stored record, for replaying an aggregate from the log."""
    from eventsourcing.utils import get_topic

    if name in NOT_AGGREGATE_EVENTS:
        return _LeavesAggregate()
    owner: type[Job] | type[Run] = Job if name.startswith("Job") else Run
    event_class = _event_class(owner, name)
    if event_class is None:
        raise UnmappedEvent(f"{name} is not an event of {owner.__name__}")
    id_field = "job_id" if owner is Job else "run_id"
    accepted = set(event_class.__dataclass_fields__)
    fields: dict[str, Any] = {k: v for k, v in record.items()
                              if k in accepted and k not in _BASE_ATTRIBUTES}
    if "spec" in fields:
        fields["spec"] = spec_from_record(fields["spec"])
    if "exclusions" in fields:
        fields["exclusions"] = exclusions_from_record(fields["exclusions"])
    for key in _UUID_FIELDS:
        if key in fields and not isinstance(fields[key], UUID):
            fields[key] = UUID(str(fields[key]))
    for key in ("upstream_run_ids", "dependents"):
        if key in fields:
            fields[key] = tuple(UUID(str(u)) for u in fields[key])
    originator = record[id_field]
    kwargs: dict[str, Any] = {
        "originator_id": originator if isinstance(originator, UUID) else UUID(str(originator)),
        "originator_version": int(record["version"]), "timestamp": record["at"], **fields}
    if "originator_topic" in accepted:
        kwargs["originator_topic"] = get_topic(owner)
    return event_class(**kwargs)
