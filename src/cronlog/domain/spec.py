"""What a job is: its spec, and the validation every spec passes before anything is written."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronlog.domain.bounds import (
    BEFORE_EARLIEST,
    LONGEST_DURATION,
    LONGEST_SPREAD,
    RANGE_TEXT,
    require_duration,
    require_in_range,
)
from cronlog.domain.dependency import Dependency, validate_dependency
from cronlog.domain.errors import InvalidSpec, ScheduleTooCostly
from cronlog.domain.exclusions import (
    NO_EXCLUSIONS,
    ExcludingSchedule,
    Exclusions,
    validate_calendar_name,
    validate_exclusions,
)
from cronlog.domain.notify_rule import NotifyRule, notify_rule
from cronlog.domain.policies import MisfirePolicy, OverlapPolicy, RetryPolicy
from cronlog.domain.schedule import (
    AfterUpstreams,
    BoundedSchedule,
    CronSchedule,
    IntervalSchedule,
    OneOffSchedule,
    Schedule,
    zone_named,
)

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_LABELS = 64
MAX_LABEL_CHARS = 256
MAX_TIMEOUT = LONGEST_DURATION
MAX_BACKOFF = LONGEST_DURATION
MAX_ATTEMPTS = 100
MAX_SPREAD = LONGEST_SPREAD
# Below a second a worker's poll and hold loop could not start even a served attempt in time.
MIN_START_TIMEOUT = timedelta(seconds=1)
MAX_START_TIMEOUT = LONGEST_DURATION
# A worker heartbeats an attempt at most once a second, three times within its job's
# heartbeat timeout (worker/running_attempts.py): below this, the trip to the scheduler
# would have less than a second.
MIN_HEARTBEAT_TIMEOUT = timedelta(seconds=3)
# Error types are matched against the part of a handler's error before ':'.
MAX_NON_RETRYABLE = 64
MAX_ERROR_TYPE_CHARS = 200
# Queues become part of a Kafka topic name; names and tenants are shown and filtered on.
QUEUE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:/ -]{1,200}")
TENANT_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
HANDLER_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


@dataclass(frozen=True)
class JobSpec:
    name: str
    tenant: str
    queue: str
    handler: str
    payload: bytes = b""
    cron: str | None = None
    at: datetime | None = None
    time_zone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    timeout: timedelta = timedelta(minutes=5)
    heartbeat_timeout: timedelta = timedelta(seconds=60)
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    misfire_policy: MisfirePolicy = MisfirePolicy.RUN_LATEST
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    labels: Mapping[str, str] = field(default_factory=dict)
    spread: timedelta = timedelta(0)
    # None: the scheduler's default start timeout (its CRONLOG_START_TIMEOUT_MS).
    start_timeout: timedelta | None = None
    # A job that runs after other jobs' runs end, instead of on a schedule (issue 16).
    after: Dependency | None = None
    # Every this much elapsed time, on the grid through start_at (issue 20): the Unix epoch
    # when start_at is not given (domain/schedule.py, IntervalSchedule).
    every: timedelta | None = None
    # Local days in time_zone on which the job does not fire (issue 20, docs/calendars.md),
    # and the tenant's named calendar whose excluded days it follows as well.
    exclusions: Exclusions = NO_EXCLUSIONS
    calendar: str | None = None
    # Which of its alerts go to which of the tenant's channels (domain/notify_rule.py);
    # None: its dead letters go to the tenant's default channels, nothing else is sent.
    notify: NotifyRule | None = None

    def schedule(self, calendar: Exclusions = NO_EXCLUSIONS) -> Schedule:
        """The job's fire times: its schedule within its bounds, without the days its own
        exclusions and `calendar` (the named calendar's, as its owner holds them) exclude."""
        if self.after is not None:
            return AfterUpstreams()
        excluded = self.exclusions.union(calendar) if calendar else self.exclusions
        bounded = self._bounded()
        if not excluded:
            return bounded
        return ExcludingSchedule(bounded, excluded, zone_named(self.time_zone))

    def _bounded(self) -> Schedule:
        inner: Schedule
        if self.cron is not None:
            inner = CronSchedule.parse(self.cron, self.time_zone)
        elif self.every is not None:
            inner = IntervalSchedule.checked(self.every, self.start_at)
        elif self.at is not None:
            inner = OneOffSchedule(self.at)
        else:
            raise InvalidSpec("spec.schedule", "a cron expression, an interval ('every'), "
                                               "an 'at' time or 'after' upstream jobs is "
                                               "needed")
        if self.start_at is None and self.end_at is None:
            return inner
        return BoundedSchedule(inner, self.start_at, self.end_at)


def _check_pattern(value: str, pattern: re.Pattern[str], field_name: str, what: str) -> None:
    if not value:
        raise InvalidSpec(field_name, f"{what} must not be empty")
    if not pattern.fullmatch(value):
        raise InvalidSpec(field_name, f"{what} {value!r} must match {pattern.pattern}")


def _check_retry(policy: RetryPolicy) -> None:
    f = "spec.retry_policy"
    if not 1 <= policy.max_attempts <= MAX_ATTEMPTS:
        raise InvalidSpec(f"{f}.max_attempts", f"must be between 1 and {MAX_ATTEMPTS}")
    require_duration(policy.initial_backoff, f"{f}.initial_backoff", MAX_BACKOFF,
                     allow_zero=True)
    require_duration(policy.max_backoff, f"{f}.max_backoff", MAX_BACKOFF, allow_zero=True)
    if policy.max_backoff < policy.initial_backoff:
        raise InvalidSpec(f"{f}.max_backoff", "must not be less than initial_backoff")
    if not 1.0 <= policy.coefficient <= 100.0:
        raise InvalidSpec(f"{f}.coefficient", "must be between 1.0 and 100.0")
    if not 0.0 <= policy.jitter <= 1.0:
        raise InvalidSpec(f"{f}.jitter", "must be between 0.0 and 1.0")
    if len(policy.non_retryable_errors) > MAX_NON_RETRYABLE:
        raise InvalidSpec(f"{f}.non_retryable_errors", f"at most {MAX_NON_RETRYABLE} entries")
    for error_type in policy.non_retryable_errors:
        if not 1 <= len(error_type) <= MAX_ERROR_TYPE_CHARS:
            raise InvalidSpec(f"{f}.non_retryable_errors",
                              f"each entry must be 1-{MAX_ERROR_TYPE_CHARS} characters "
                              f"({error_type[:40]!r})")


def _check_fires(spec: JobSpec) -> None:
    """Refuses a schedule that can never fire within its bounds or around its own excluded
    days. At most one fire time is computed (in at most schedule_search.BOUND_TEXT), from
    start_at or the start of the range: validation runs on every create and
    update, at the api and again at the owner. A one-off time in the past is accepted: it
    fires late, by the misfire policy."""
    at, start, end = spec.at, spec.start_at, spec.end_at
    if at is not None:
        if end is not None and at > end:
            raise InvalidSpec("spec.schedule.at", "is after end_at: the job would never fire")
        if start is not None and at < start:
            raise InvalidSpec("spec.schedule.at", "is before start_at: the job would never fire")
        return
    if start is None and end is None and not spec.exclusions:
        return  # parsing the cron expression already refused one that never fires
    if spec.schedule().next_fire_after(BEFORE_EARLIEST) is None:
        if start is None and end is None:
            raise InvalidSpec("spec.exclusions", "the exclusions leave no fire time "
                                                 f"{RANGE_TEXT}: the job would never fire")
        window = (f"between {start.isoformat() if start else '1970-01-01T00:00:00Z'} and "
                  f"{end.isoformat() if end else '2100-01-01T00:00:00Z'}")
        raise InvalidSpec("spec.end_at" if end is not None else "spec.start_at",
                          f"the schedule has no fire time {window}: the job would never fire")


def _cost_field(spec: JobSpec, calendar: Exclusions = NO_EXCLUSIONS) -> str:
    if calendar and spec.calendar is not None:
        return "spec.calendar"
    if spec.exclusions:
        return "spec.exclusions"
    return "spec.schedule.cron" if spec.cron is not None else "spec.schedule"


def check_search_cost(spec: JobSpec, calendar: Exclusions = NO_EXCLUSIONS,
                      after: datetime = BEFORE_EARLIEST) -> None:
    """Invariant 12 at the door: the spec's cron expression admitted (its fire times never
    wait past the search's horizon, schedule_search.LONGEST_WAIT_DAYS), and its next fire
    time after `after`, without its own excluded days and `calendar`'s, found within the
    search's bound (BOUND_TEXT); ScheduleTooCostly naming the field and the bound
    otherwise. One bounded search: under 1 ms."""
    if spec.cron is not None:
        CronSchedule.parse(spec.cron, spec.time_zone).admitted()
    try:
        spec.schedule(calendar).next_fire_after(after)
    except ScheduleTooCostly as exc:
        raise ScheduleTooCostly(_cost_field(spec, calendar), exc.message) from exc


def _check_after(spec: JobSpec) -> Dependency | None:
    """A dependent job has no schedule of its own: no cron, no 'at', no bounds and no zone in
    this first version (docs/dependencies.md)."""
    if spec.after is None:
        return None
    if spec.cron is not None or spec.at is not None or spec.every is not None:
        raise InvalidSpec("spec.schedule", "give one of a cron expression, an interval, an "
                                           "'at' time or 'after' upstream jobs")
    for name, value in (("spec.start_at", spec.start_at), ("spec.end_at", spec.end_at)):
        if value is not None:
            raise InvalidSpec(name, "a job that runs after other jobs has no fire times to "
                                    "bound")
    if spec.time_zone != "UTC":
        raise InvalidSpec("spec.time_zone", "a job that runs after other jobs has no fire "
                                            "times to place in a zone; leave it UTC")
    return validate_dependency(spec.after)


def _check_calendar(spec: JobSpec) -> tuple[Exclusions, str | None]:
    """A dependent job has no fire times to exclude."""
    exclusions = validate_exclusions(spec.exclusions, "spec.exclusions")
    calendar = spec.calendar
    if calendar is not None:
        validate_calendar_name(calendar, "spec.calendar")
    if spec.after is not None:
        for name, value in (("spec.exclusions", exclusions), ("spec.calendar", calendar)):
            if value:
                raise InvalidSpec(name, "a job that runs after other jobs has no fire times "
                                        "to exclude")
    return exclusions, calendar


def _check_notify(rule: NotifyRule) -> NotifyRule:
    """Again in the domain what the api checked: a rule read from a record is as it came."""
    if not isinstance(rule, NotifyRule):
        raise InvalidSpec("spec.notify", "must be a notify rule")
    return notify_rule(rule.channels, [str(kind) for kind in rule.on], rule.late_after)


def validate_spec(spec: JobSpec) -> JobSpec:
    """Returns the spec if every field is acceptable; raises InvalidSpec naming the first bad
    field otherwise. Times come back normalised to UTC."""
    _check_pattern(spec.name, NAME_PATTERN, "spec.name", "name")
    _check_pattern(spec.tenant, TENANT_PATTERN, "spec.tenant", "tenant")
    _check_pattern(spec.queue, QUEUE_PATTERN, "spec.queue", "queue")
    _check_pattern(spec.handler, HANDLER_PATTERN, "spec.handler", "handler")
    if len(spec.payload) > MAX_PAYLOAD_BYTES:
        raise InvalidSpec("spec.payload",
                          f"{len(spec.payload)} bytes is over the limit of {MAX_PAYLOAD_BYTES}")
    zone_named(spec.time_zone)
    if sum(kind is not None for kind in (spec.cron, spec.at, spec.every)) > 1:
        raise InvalidSpec("spec.schedule", "give one of a cron expression, an interval "
                                           "('every') or an 'at' time, not several")
    after = _check_after(spec)
    exclusions, calendar = _check_calendar(spec)
    at = require_in_range(spec.at, "spec.schedule.at") if spec.at is not None else None
    start = require_in_range(spec.start_at, "spec.start_at") if spec.start_at else None
    end = require_in_range(spec.end_at, "spec.end_at") if spec.end_at else None
    if start is not None and end is not None and end <= start:
        raise InvalidSpec("spec.end_at", "must be after start_at")
    require_duration(spec.timeout, "spec.timeout", MAX_TIMEOUT)
    require_duration(spec.heartbeat_timeout, "spec.heartbeat_timeout", MAX_TIMEOUT)
    if spec.heartbeat_timeout < MIN_HEARTBEAT_TIMEOUT:
        raise InvalidSpec("spec.heartbeat_timeout",
                          f"must be at least {MIN_HEARTBEAT_TIMEOUT.total_seconds():.0f}s, "
                          f"got {spec.heartbeat_timeout.total_seconds()}s")
    _check_retry(spec.retry_policy)
    require_duration(spec.spread, "spec.spread", MAX_SPREAD, allow_zero=True)
    if spec.start_timeout is not None:
        if spec.start_timeout < MIN_START_TIMEOUT:
            raise InvalidSpec("spec.start_timeout",
                              f"must be at least {MIN_START_TIMEOUT.total_seconds():.0f}s, "
                              f"got {spec.start_timeout.total_seconds()}s")
        require_duration(spec.start_timeout, "spec.start_timeout", MAX_START_TIMEOUT)
    if len(spec.labels) > MAX_LABELS:
        raise InvalidSpec("spec.labels", f"at most {MAX_LABELS} labels")
    for key, value in spec.labels.items():
        if not key or len(key) > MAX_LABEL_CHARS or len(value) > MAX_LABEL_CHARS:
            raise InvalidSpec("spec.labels",
                              f"label keys must be 1-{MAX_LABEL_CHARS} and values at most "
                              f"{MAX_LABEL_CHARS} characters ({key[:40]!r})")
    notify = None if spec.notify is None else _check_notify(spec.notify)
    normalised = JobSpec(
        name=spec.name, tenant=spec.tenant, queue=spec.queue, handler=spec.handler,
        payload=spec.payload, cron=spec.cron, at=at, time_zone=spec.time_zone,
        start_at=start, end_at=end, timeout=spec.timeout,
        heartbeat_timeout=spec.heartbeat_timeout, retry_policy=spec.retry_policy,
        misfire_policy=MisfirePolicy(spec.misfire_policy),
        overlap_policy=OverlapPolicy(spec.overlap_policy), labels=dict(spec.labels),
        spread=spec.spread, start_timeout=spec.start_timeout, after=after, every=spec.every,
        exclusions=exclusions, calendar=calendar, notify=notify,
    )
    normalised.schedule()  # parses the cron expression, raising on a bad one
    if normalised.cron is not None:
        CronSchedule.parse(normalised.cron, normalised.time_zone).admitted()
    try:
        _check_fires(normalised)
    except ScheduleTooCostly as exc:
        raise ScheduleTooCostly(_cost_field(normalised), exc.message) from exc
    return normalised
