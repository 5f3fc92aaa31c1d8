"""The catalogue of every message type on cronlog's topics: commands and reports on the
inbox, job and run events on the event topics, and what owners write besides (dispatches,
replies, dead letters, alerts, poison records). Each name is also its Avro schema's name
(infra/avro/schemas/<Name>.v<N>.avsc); code names a message by these members, never by a
bare string (tests/unit/domain/test_catalogue.py checks both)."""

from __future__ import annotations

from enum import StrEnum


class Command(StrEnum):
    """What the api asks an owner to decide."""

    CREATE_JOB = "CreateJob"
    UPDATE_JOB = "UpdateJob"
    PAUSE_JOB = "PauseJob"
    RESUME_JOB = "ResumeJob"
    DELETE_JOB = "DeleteJob"
    TRIGGER_JOB = "TriggerJob"
    BACKFILL_JOB = "BackfillJob"
    CANCEL_RUN = "CancelRun"
    # A dead-lettered run's new series of attempts (issue 37).
    REDRIVE_RUN = "RedriveRun"
    # A deleted job brought back, or a job rolled back, with an earlier version's spec
    # (issue 38).
    RESTORE_JOB = "RestoreJob"
    # Calendars (issue 20), keyed by the calendar's id.
    CREATE_CALENDAR = "CreateCalendar"
    UPDATE_CALENDAR = "UpdateCalendar"
    # Alert channels (issue 37), keyed by the channel's id.
    CREATE_CHANNEL = "CreateChannel"
    UPDATE_CHANNEL = "UpdateChannel"
    DELETE_CHANNEL = "DeleteChannel"
    ROTATE_CHANNEL_SECRET = "RotateChannelSecret"


class Report(StrEnum):
    """What workers tell owners, one by one or gathered in a WorkerReports message."""

    ATTEMPT_STARTED = "AttemptStartedReport"
    ATTEMPT_FINISHED = "AttemptFinishedReport"
    HEARTBEAT = "HeartbeatReport"
    WORKER_REPORTS = "WorkerReports"


class Relay(StrEnum):
    """What one owner tells another through the inbox, keyed by the receiving job: links
    between dependent jobs and their upstreams, and the ends of upstream runs (issue 16)."""

    UPSTREAM_RUN_ENDED = "UpstreamRunEnded"
    DEPENDENT_LINKED = "DependentLinked"
    DEPENDENT_UNLINKED = "DependentUnlinked"
    UPSTREAM_UNAVAILABLE = "UpstreamUnavailable"
    # Calendars (issue 20): a job following or leaving a calendar, keyed by the calendar;
    # the calendar's version and exclusions sent to a following job, keyed by the job.
    CALENDAR_SUBSCRIBED = "CalendarSubscribed"
    CALENDAR_UNSUBSCRIBED = "CalendarUnsubscribed"
    CALENDAR_PUBLISHED = "CalendarPublished"


class JobEvent(StrEnum):
    """Facts of a job's life, on the job-events topic (the Job aggregate's events, and the
    owner's record of an applied request)."""

    CREATED = "JobCreated"
    UPDATED = "JobUpdated"
    PAUSED = "JobPaused"
    RESUMED = "JobResumed"
    DELETED = "JobDeleted"
    COMPLETED = "JobCompleted"
    FIRE_ADVANCED = "JobFireAdvanced"
    FIRE_TIMES_MISSED = "JobFireTimesMissed"
    BACKFILL_REQUESTED = "JobBackfillRequested"
    REQUEST_APPLIED = "JobRequestApplied"
    # Dependencies (issue 16): on an upstream's log, who follows it; on a dependent's, the
    # upstream ends that changed its fan-in, and links its upstreams refused.
    DEPENDENT_LINKED = "JobDependentLinked"
    DEPENDENT_UNLINKED = "JobDependentUnlinked"
    UPSTREAM_RECORDED = "JobUpstreamRecorded"
    UPSTREAM_UNAVAILABLE = "JobUpstreamUnavailable"
    # Calendars (issue 20): the version of its named calendar the job now follows.
    CALENDAR_APPLIED = "JobCalendarApplied"
    # Restore (issue 38): the spec of an earlier version given back, naming that version.
    RESTORED = "JobRestored"


# The job events that give a job its spec: a job's row keeps the last of them as its spec.
SPEC_EVENTS = frozenset({JobEvent.CREATED, JobEvent.UPDATED, JobEvent.RESTORED})


class CalendarEvent(StrEnum):
    """Facts of a calendar's life (issue 20). On the job-events topic, keyed by the
    calendar's id, so that its owner, the state projection and replays read them with the
    jobs of the same partition; every job-events reader accepts or skips them."""

    CREATED = "CalendarCreated"
    UPDATED = "CalendarUpdated"
    JOB_SUBSCRIBED = "CalendarJobSubscribed"
    JOB_UNSUBSCRIBED = "CalendarJobUnsubscribed"


class ChannelEvent(StrEnum):
    """Facts of an alert channel's life (issue 37, domain/channel.py). On the job-events
    topic, keyed by the channel's id like a calendar's: its owner, the state projection
    (the `channels` table) and replays read them with the jobs of the same partition;
    every job-events reader accepts or skips them. None holds a secret."""

    CREATED = "ChannelCreated"
    UPDATED = "ChannelUpdated"
    SECRET_ROTATED = "ChannelSecretRotated"
    DELETED = "ChannelDeleted"
    # A deleted channel created again: new settings, the next secret rotation.
    RESTORED = "ChannelRestored"


class RunEvent(StrEnum):
    """Facts of a run's life, on the run-events topic (the Run aggregate's events)."""

    SCHEDULED = "RunScheduled"
    MISSED = "RunMissed"
    SKIPPED = "RunSkipped"
    ATTEMPT_DISPATCHED = "AttemptDispatched"
    ATTEMPT_WAITING = "AttemptWaiting"
    ATTEMPT_STARTED = "AttemptStarted"
    ATTEMPT_PROGRESSED = "AttemptProgressed"
    ATTEMPT_SUCCEEDED = "AttemptSucceeded"
    ATTEMPT_FAILED = "AttemptFailed"
    ATTEMPT_LOST = "AttemptLost"
    ATTEMPT_TIMED_OUT = "AttemptTimedOut"
    ATTEMPT_CANCELLED = "AttemptCancelled"
    SUCCEEDED = "RunSucceeded"
    FAILED = "RunFailed"
    CANCELLED = "RunCancelled"
    REDRIVEN = "RunRedriven"


class OwnerRecord(StrEnum):
    """What an owner writes besides events: to workers, the api and operators."""

    DISPATCH = "Dispatch"
    CANCEL_ATTEMPT = "CancelAttempt"
    COMMAND_REPLY = "CommandReply"
    DEAD_LETTER = "DeadLetter"
    ALERT = "Alert"
    POISON_MESSAGE = "PoisonMessage"


class Envelope(StrEnum):
    """Messages that carry several of the others, each still encoded as a message of its
    own (issue 34): an api's commands for one inbox partition, an owner cycle's replies to
    one api."""

    COMMAND_BATCH = "CommandBatch"
    COMMAND_REPLIES = "CommandReplies"


class Fleet(StrEnum):
    """What workers say of themselves on the workers topic (compacted, keyed by worker id):
    read by the apis to list the live workers (docs/workers.md)."""

    WORKER_ANNOUNCED = "WorkerAnnounced"


class AlertDelivery(StrEnum):
    """What the notifier records of its deliveries on the alert-deliveries topic (keyed by
    the job's id): each attempt of each alert to each channel, projected into ClickHouse's
    alert_deliveries for the tenant to see (docs/alerts.md)."""

    ATTEMPTED = "AlertDeliveryAttempted"


CATALOGUE: tuple[type[StrEnum], ...] = (Command, Report, Relay, JobEvent, CalendarEvent,
                                         ChannelEvent, RunEvent, OwnerRecord, Envelope,
                                         Fleet, AlertDelivery)
