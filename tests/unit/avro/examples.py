"""A realistic record for every message cronlog writes, by schema name and version."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any
from uuid import UUID

JOB = UUID("11111111-2222-3333-4444-555555555555")
RUN = UUID("66666666-7777-8888-9999-aaaaaaaaaaaa")
AT = datetime(2026, 3, 8, 7, 0, 0, 123456, tzinfo=UTC)

SPEC: dict[str, Any] = {
    "name": "nightly", "tenant": "acme", "queue": "default", "handler": "echo",
    "payload": b"\x00payload", "schedule": {"kind": "cron", "cron": "30 2 * * *", "at": None},
    "time_zone": "America/New_York", "start_at": None, "end_at": AT, "timeout_ms": 60000,
    "heartbeat_timeout_ms": 30000,
    "retry_policy": {"max_attempts": 3, "initial_backoff_ms": 1000, "max_backoff_ms": 60000,
                     "coefficient": 2.0, "jitter": 1.0, "non_retryable_errors": ["Fatal"]},
    "misfire_policy": "run_latest", "overlap_policy": "allow", "labels": {"team": "data"},
}
COMMAND = {"request_id": "req-1", "job_id": JOB, "at": AT}
JOB_EVENT = {"job_id": JOB, "version": 2, "at": AT, "request_id": "req-1"}
RUN_EVENT = {"run_id": RUN, "job_id": JOB, "version": 2, "at": AT}
ATTEMPT = {"attempt": 1, "worker": "w-1"}

SPEC_V2: dict[str, Any] = {**SPEC, "spread_ms": 90000}
SPEC_V3: dict[str, Any] = {**SPEC_V2, "start_timeout_ms": 10000}
UPSTREAM = UUID("0f0f0f0f-1e1e-2d2d-3c3c-4b4b4b4b4b4b")
UPSTREAM_RUN = UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
# A dependent job (issue 16): 'after' instead of a cron expression.
SPEC_V4: dict[str, Any] = {
    **SPEC_V3, "schedule": {"kind": "after", "cron": None, "at": None}, "time_zone": "UTC",
    "end_at": None, "after": {"job_ids": [UPSTREAM, JOB], "condition": "success",
                              "wait_window_ms": 3_600_000}}
CHAIN = {"logical_time": AT, "cascade": "", "upstream_run_ids": [UPSTREAM_RUN], "depth": 1}

# An interval job (issue 20): every 90 minutes from start_at.
SPEC_V5: dict[str, Any] = {
    **SPEC_V3, "schedule": {"kind": "every", "cron": None, "at": None, "every_ms": 5_400_000},
    "start_at": AT, "after": None}
SPEC_V5_CRON: dict[str, Any] = {
    **SPEC_V3, "schedule": {**SPEC["schedule"], "every_ms": None}, "after": None}

# Calendars (issue 20): a job's own excluded days and the calendar it follows.
CALENDAR = UUID("c0c0c0c0-1111-5222-8333-444444444444")
DAYS = [{"first": date(2026, 12, 24), "last": date(2026, 12, 26)},
        {"first": date(2027, 1, 1), "last": date(2027, 1, 1)}]
SPEC_V6: dict[str, Any] = {**SPEC_V5_CRON, "exclusions": DAYS, "calendar": "holidays"}
CALENDAR_FIELDS = {"tenant": "acme", "name": "holidays", "description": "Public holidays",
                   "exclusions": DAYS}

# Alert channels (issue 37): no secret in any of them, only its rotation.
CHANNEL = UUID("c4a77e10-1111-5222-8333-444444444444")
CHANNEL_FIELDS = {"tenant": "acme", "name": "ops-hook",
                  "target": "https://hooks.example.com/cronlog", "recipients": [],
                  "description": "The on-call webhook", "is_default": True}
CHANNEL_EVENT = {"channel_id": CHANNEL, "at": AT, "tenant": "acme", "name": "ops-hook"}
NOTIFY = {"channels": ["ops-hook", "team-mail"], "on": ["dead_lettered", "started_late"],
          "late_after_ms": 120_000}
SPEC_V7: dict[str, Any] = {**SPEC_V6, "notify": NOTIFY}

EXAMPLES: dict[tuple[str, int], dict[str, Any]] = {
    ("CreateChannel", 1): {"request_id": "req-1", **CHANNEL_FIELDS, "kind": "webhook",
                           "at": AT, "correlation_id": "c0ffee"},
    ("UpdateChannel", 1): {"request_id": "req-2", **CHANNEL_FIELDS, "target": "",
                           "recipients": ["ops@example.com"], "is_default": False,
                           "expected_version": 2, "at": AT, "correlation_id": None},
    ("DeleteChannel", 1): {"request_id": "req-3", "tenant": "acme", "name": "ops-hook",
                           "at": AT, "correlation_id": "c0ffee"},
    ("RotateChannelSecret", 1): {"request_id": "req-4", "tenant": "acme",
                                 "name": "ops-hook", "at": AT, "correlation_id": None},
    ("ChannelCreated", 1): {**CHANNEL_EVENT, **CHANNEL_FIELDS, "version": 1,
                            "request_id": "req-1", "kind": "webhook"},
    ("ChannelUpdated", 1): {**CHANNEL_EVENT, **CHANNEL_FIELDS, "version": 2,
                            "request_id": None, "target": "",
                            "recipients": ["ops@example.com", "dev@example.com"]},
    ("ChannelSecretRotated", 1): {**CHANNEL_EVENT, "version": 3, "request_id": "req-4",
                                  "secret_rotation": 1},
    ("ChannelDeleted", 1): {**CHANNEL_EVENT, "version": 4, "request_id": "req-3"},
    ("ChannelRestored", 1): {**CHANNEL_EVENT, **CHANNEL_FIELDS, "version": 5,
                             "request_id": "req-5", "kind": "email", "target": "",
                             "recipients": ["ops@example.com"], "secret_rotation": 2},
    ("RestoreJob", 1): {**COMMAND, "restored_version": 4, "skip_missed": True,
                        "spec": SPEC_V7, "correlation_id": "c0ffee", "calendar_version": 3,
                        "calendar_exclusions": DAYS[:1]},
    ("JobRestored", 1): {**JOB_EVENT, "restored_version": 4, "spec": SPEC_V7,
                         "status": "active", "skip_missed": False, "next_fire_at": AT},
    ("CreateJob", 8): {**COMMAND, "spec": SPEC_V7, "correlation_id": "c0ffee",
                       "calendar_version": 3, "calendar_exclusions": DAYS[:1]},
    ("UpdateJob", 8): {**COMMAND, "expected_version": 3,
                       "spec": {**SPEC_V6, "notify": {**NOTIFY, "late_after_ms": None}},
                       "correlation_id": None, "calendar_version": 0,
                       "calendar_exclusions": []},
    ("JobCreated", 7): {**JOB_EVENT, "spec": SPEC_V7, "next_fire_at": AT},
    ("JobUpdated", 7): {**JOB_EVENT, "spec": {**SPEC_V6, "notify": None}, "next_fire_at": None},
    ("CreateJob", 7): {**COMMAND, "spec": SPEC_V6, "correlation_id": "c0ffee",
                       "calendar_version": 3, "calendar_exclusions": DAYS[:1]},
    ("UpdateJob", 7): {**COMMAND, "expected_version": 3, "spec": {**SPEC_V5, "exclusions": DAYS,
                                                                  "calendar": None},
                       "correlation_id": None, "calendar_version": 0,
                       "calendar_exclusions": []},
    ("JobCreated", 6): {**JOB_EVENT, "spec": SPEC_V6, "next_fire_at": AT},
    ("JobUpdated", 6): {**JOB_EVENT, "spec": {**SPEC_V6, "exclusions": []}, "next_fire_at": None},
    ("JobCalendarApplied", 1): {**JOB_EVENT, "name": "holidays", "calendar_version": 3,
                                "found": True, "exclusions": DAYS, "next_fire_at": AT},
    ("CreateCalendar", 1): {"request_id": "req-1", **CALENDAR_FIELDS, "at": AT,
                            "correlation_id": "c0ffee"},
    ("UpdateCalendar", 1): {"request_id": "req-2", **CALENDAR_FIELDS, "expected_version": 2,
                            "at": AT, "correlation_id": None},
    ("CalendarCreated", 1): {"calendar_id": CALENDAR, "version": 1, "at": AT,
                             "request_id": "req-1", **CALENDAR_FIELDS},
    ("CalendarUpdated", 1): {"calendar_id": CALENDAR, "version": 2, "at": AT,
                             "request_id": None, **CALENDAR_FIELDS, "exclusions": []},
    ("CalendarJobSubscribed", 1): {"calendar_id": CALENDAR, "version": 2, "at": AT,
                                   "job_id": JOB},
    ("CalendarJobUnsubscribed", 1): {"calendar_id": CALENDAR, "version": 2, "at": AT,
                                     "job_id": JOB},
    ("CalendarSubscribed", 1): {"calendar_id": CALENDAR, "tenant": "acme", "name": "holidays",
                                "job_id": JOB, "at": AT},
    ("CalendarUnsubscribed", 1): {"calendar_id": CALENDAR, "tenant": "acme",
                                  "name": "holidays", "job_id": JOB, "at": AT},
    ("CalendarPublished", 1): {"job_id": JOB, "calendar_id": CALENDAR, "tenant": "acme",
                               "name": "holidays", "version": 0, "found": False,
                               "exclusions": [], "at": AT},
    # A calendar's update reaches its followers by reference (issue 33): the version only.
    ("CalendarPublished", 2): {"job_id": JOB, "calendar_id": CALENDAR, "tenant": "acme",
                               "name": "holidays", "version": 3, "found": True,
                               "exclusions": [], "at": AT, "by_reference": True},
    # Interval schedules (issue 20): the Schedule record gains every_ms.
    ("CreateJob", 6): {**COMMAND, "spec": SPEC_V5, "correlation_id": None},
    ("UpdateJob", 6): {**COMMAND, "expected_version": 3, "spec": SPEC_V5_CRON,
                       "correlation_id": "c0ffee"},
    ("JobCreated", 5): {**JOB_EVENT, "spec": SPEC_V5, "next_fire_at": AT},
    ("JobUpdated", 5): {**JOB_EVENT, "spec": SPEC_V5_CRON, "next_fire_at": AT},
    # Dependencies (issue 16): JobSpec with 'after', dependent runs, cascades, links, ends.
    ("CreateJob", 5): {**COMMAND, "spec": SPEC_V4, "correlation_id": "c0ffee"},
    ("UpdateJob", 5): {**COMMAND, "expected_version": 3, "spec": {**SPEC_V3, "after": None},
                       "correlation_id": None},
    ("JobCreated", 4): {**JOB_EVENT, "spec": SPEC_V4, "next_fire_at": None},
    ("JobUpdated", 4): {**JOB_EVENT, "spec": {**SPEC_V3, "after": None}, "next_fire_at": AT},
    ("RunScheduled", 3): {**RUN_EVENT, "tenant": "acme", "queue": "default", "handler": "echo",
                          "scheduled_at": AT, "not_before": AT, "trigger": "dependency",
                          "max_attempts": 3, "attempt": 1, "timeout_ms": 5000, **CHAIN},
    ("RunMissed", 2): {"run_id": RUN, "job_id": JOB, "version": 1, "at": AT, "tenant": "acme",
                       "queue": "default", "handler": "echo", "scheduled_at": AT,
                       "reason": "upstream job(s) x did not end within the wait window",
                       "trigger": "dependency", **CHAIN},
    ("RunSkipped", 2): {"run_id": RUN, "job_id": JOB, "version": 1, "at": AT, "tenant": "acme",
                        "queue": "default", "handler": "echo", "scheduled_at": AT,
                        "reason": "overlap policy skip", "trigger": "schedule",
                        "logical_time": None, "cascade": None, "upstream_run_ids": [],
                        "depth": 0},
    ("TriggerJob", 3): {**COMMAND, "correlation_id": "c0ffee", "cascade": True},
    ("BackfillJob", 3): {**COMMAND, "after": AT, "until": AT, "correlation_id": None,
                         "cascade": False},
    ("UpstreamRunEnded", 1): {"dependent_job_id": JOB, "upstream_job_id": UPSTREAM,
                              "upstream_run_id": UPSTREAM_RUN, "tenant": "acme",
                              "status": "succeeded", "logical_time": AT, "cascade": "req-9",
                              "depth": 2, "at": AT},
    ("DependentLinked", 1): {"upstream_job_id": UPSTREAM, "dependent_job_id": JOB,
                             "tenant": "acme", "at": AT},
    ("DependentUnlinked", 1): {"upstream_job_id": UPSTREAM, "dependent_job_id": JOB,
                               "tenant": "acme", "at": AT},
    ("UpstreamUnavailable", 1): {"dependent_job_id": JOB, "upstream_job_id": UPSTREAM,
                                 "reason": "job not found", "at": AT},
    ("JobDependentLinked", 1): {**JOB_EVENT, "request_id": None, "dependent_job_id": JOB,
                                "dependents": [JOB, RUN]},
    ("JobDependentUnlinked", 1): {**JOB_EVENT, "request_id": None, "dependent_job_id": JOB,
                                  "dependents": [RUN]},
    ("JobUpstreamRecorded", 1): {**JOB_EVENT, "request_id": None, "upstream_job_id": UPSTREAM,
                                 "upstream_run_id": UPSTREAM_RUN, "status": "dead_lettered",
                                 "logical_time": AT, "cascade": "", "depth": 0,
                                 "folded": "closed", "opened_at": AT,
                                 "reason": "upstream ended dead_lettered; runs on success"},
    ("JobUpstreamUnavailable", 1): {**JOB_EVENT, "request_id": None, "upstream_job_id": UPSTREAM,
                                    "reason": "job not found"},
    # JobSpec with its own start timeout: CreateJob and UpdateJob v4, JobCreated and
    # JobUpdated v3.
    ("CreateJob", 4): {**COMMAND, "spec": SPEC_V3, "correlation_id": "c0ffee"},
    ("UpdateJob", 4): {**COMMAND, "expected_version": 3, "spec": SPEC_V3,
                       "correlation_id": None},
    ("JobCreated", 3): {**JOB_EVENT, "spec": SPEC_V3, "next_fire_at": AT},
    ("JobUpdated", 3): {**JOB_EVENT, "spec": {**SPEC_V3, "start_timeout_ms": None},
                        "next_fire_at": None},
    ("CreateJob", 2): {**COMMAND, "spec": SPEC_V2},
    ("UpdateJob", 2): {**COMMAND, "expected_version": 3, "spec": SPEC_V2},
    ("JobCreated", 2): {**JOB_EVENT, "spec": SPEC_V2, "next_fire_at": AT},
    ("JobUpdated", 2): {**JOB_EVENT, "spec": SPEC_V2, "next_fire_at": None},
    ("CreateJob", 1): {**COMMAND, "spec": SPEC},
    ("UpdateJob", 1): {**COMMAND, "expected_version": 3, "spec": SPEC},
    ("PauseJob", 1): COMMAND,
    ("ResumeJob", 1): COMMAND,
    ("DeleteJob", 1): COMMAND,
    ("TriggerJob", 1): COMMAND,
    ("CancelRun", 1): {**COMMAND, "run_id": RUN},
    ("AttemptStartedReport", 1): {"run_id": RUN, "job_id": JOB, **ATTEMPT, "started_at": AT},
    ("AttemptFinishedReport", 1): {"run_id": RUN, "job_id": JOB, **ATTEMPT, "finished_at": AT,
                                   "outcome": "failed", "output": b"out",
                                   "output_truncated": False, "error": "Boom: no"},
    ("HeartbeatReport", 1): {"run_id": RUN, "job_id": JOB, **ATTEMPT, "at": AT},
    ("WorkerReports", 1): {"worker": "w-1", "started": [
        {"run_id": RUN, "job_id": JOB, "attempt": 1, "started_at": AT}], "finished": [
        {"run_id": RUN, "job_id": JOB, "attempt": 1, "finished_at": AT, "outcome": "succeeded",
         "output": b"out", "output_truncated": False, "error": None}]},
    ("JobCreated", 1): {**JOB_EVENT, "spec": SPEC, "next_fire_at": AT},
    ("JobUpdated", 1): {**JOB_EVENT, "spec": SPEC, "next_fire_at": None},
    ("JobPaused", 1): JOB_EVENT,
    ("JobResumed", 1): {**JOB_EVENT, "next_fire_at": AT},
    ("JobDeleted", 1): JOB_EVENT,
    ("JobFireAdvanced", 1): {**JOB_EVENT, "fired_at": AT, "run_id": RUN, "next_fire_at": AT},
    ("JobCompleted", 1): JOB_EVENT,
    ("RunScheduled", 1): {**RUN_EVENT, "tenant": "acme", "queue": "default", "handler": "echo",
                          "scheduled_at": AT, "not_before": AT, "trigger": "schedule",
                          "max_attempts": 3},
    ("RunScheduled", 2): {**RUN_EVENT, "tenant": "acme", "queue": "default", "handler": "echo",
                          "scheduled_at": AT, "not_before": AT, "trigger": "schedule",
                          "max_attempts": 3, "attempt": 1, "timeout_ms": 5000},
    ("AttemptDispatched", 1): {**RUN_EVENT, "attempt": 1, "not_before": AT, "timeout_ms": 5000},
    ("AttemptStarted", 1): {**RUN_EVENT, **ATTEMPT, "started_at": AT},
    ("AttemptSucceeded", 1): {**RUN_EVENT, **ATTEMPT, "finished_at": AT, "output": b"ok",
                              "output_truncated": True},
    ("AttemptFailed", 1): {**RUN_EVENT, **ATTEMPT, "finished_at": AT, "error": "Boom: no",
                           "output": b"", "output_truncated": False},
    ("AttemptLost", 1): {**RUN_EVENT, "attempt": 1, "reason": "no heartbeat for 60s"},
    ("AttemptTimedOut", 1): {**RUN_EVENT, "attempt": 1},
    ("RunMissed", 1): {"run_id": RUN, "job_id": JOB, "version": 1, "at": AT, "tenant": "acme",
                       "queue": "default", "handler": "echo", "scheduled_at": AT,
                       "reason": "misfired"},
    ("RunSkipped", 1): {"run_id": RUN, "job_id": JOB, "version": 1, "at": AT, "tenant": "acme",
                        "queue": "default", "handler": "echo", "scheduled_at": AT,
                        "reason": "overlap policy skip: earlier run still going"},
    ("AttemptCancelled", 1): {**RUN_EVENT, "attempt": 1, "reason": "cancelled by request r"},
    ("RunCancelled", 1): {**RUN_EVENT, "reason": "cancelled by request r"},
    ("JobBackfillRequested", 1): {**JOB_EVENT, "after": AT, "until": AT, "runs": 3},
    ("JobFireTimesMissed", 1): {**JOB_EVENT, "request_id": None, "tenant": "acme",
                                "first": AT, "last": AT, "count": 86_340,
                                "reason": "misfired: more than 0:01:00 late (misfire policy "
                                          "skip)", "next_fire_at": AT},
    ("BackfillJob", 1): {**COMMAND, "after": AT, "until": AT},
    ("CancelAttempt", 1): {"run_id": RUN, "job_id": JOB, "attempt": 1, "reason": "cancelled",
                           "at": AT},
    ("DeadLetter", 1): {"run_id": RUN, "job_id": JOB, "tenant": "acme", "queue": "default",
                        "handler": "echo", "scheduled_at": AT, "attempts": 3,
                        "reason": "attempt 3 of 3 failed", "at": AT},
    ("AttemptWaiting", 1): {**RUN_EVENT, "attempt": 2, "not_before": AT},
    ("Alert", 2): {"alert_id": UUID("a1e27000-1111-5222-8333-444444444444"), "tenant": "acme",
                   "kind": "attempt_failed", "job_id": JOB, "job_name": "nightly",
                   "run_id": RUN, "attempt": 2, "message": "attempt 2 failed: exit status 1",
                   "at": AT, "notify": {"channels": ["ops-hook"], "on": ["failed"]}},
    ("Alert", 1): {"tenant": "acme", "kind": "run_dead_lettered", "job_id": JOB, "run_id": RUN,
                   "message": "run dead-lettered", "at": AT},
    ("PoisonMessage", 1): {"source_topic": "cronlog.inbox", "partition": 3, "offset": 42,
                           "message_name": "PauseJob", "job_id": JOB, "tenant": "acme",
                           "error": "OverflowError: date value out of range",
                           "body": b"\xc3\x01body", "at": AT},
    ("RunSucceeded", 1): RUN_EVENT,
    ("RunFailed", 1): {**RUN_EVENT, "reason": "attempt 3 of 3 failed"},
    ("Dispatch", 1): {"run_id": RUN, "job_id": JOB, "attempt": 1, "tenant": "acme",
                      "handler": "echo", "payload": b"p", "scheduled_at": AT, "not_before": AT,
                      "timeout_ms": 5000, "heartbeat_timeout_ms": 30000,
                      "idempotency_key": str(RUN)},
    ("CommandReply", 1): {"request_id": "req-1", "ok": True, "error_code": None,
                          "error_message": None, "job_id": JOB, "job_version": 1},
    # Commands since correlation ids: the api's own id per send, copied into the reply.
    ("CreateJob", 3): {**COMMAND, "spec": SPEC_V2, "correlation_id": "c0ffee"},
    ("UpdateJob", 3): {**COMMAND, "expected_version": 3, "spec": SPEC_V2,
                       "correlation_id": "c0ffee"},
    ("PauseJob", 2): {**COMMAND, "correlation_id": "c0ffee"},
    ("ResumeJob", 2): {**COMMAND, "correlation_id": None},
    ("DeleteJob", 2): {**COMMAND, "correlation_id": "c0ffee"},
    ("TriggerJob", 2): {**COMMAND, "correlation_id": "c0ffee"},
    ("BackfillJob", 2): {**COMMAND, "after": AT, "until": AT, "correlation_id": "c0ffee"},
    ("CancelRun", 2): {**COMMAND, "run_id": RUN, "correlation_id": "c0ffee"},
    ("CommandReply", 2): {"request_id": "req-1", "ok": False, "error_code": "INVALID_ARGUMENT",
                          "error_message": "request_id 'req-1' was already used",
                          "job_id": JOB, "job_version": None, "correlation_id": "c0ffee",
                          "error_field": "request_id"},
    # Replies since the owner says a retry was answered before (v3).
    ("CommandReply", 3): {"request_id": "req-1", "ok": True, "error_code": None,
                          "error_message": None, "job_id": JOB, "job_version": 1,
                          "correlation_id": "api-0123/c0ffee", "error_field": None,
                          "repeated": True},
    # Envelopes carry encoded messages; their bytes are opaque to the codec.
    ("CommandBatch", 1): {"commands": [{"key": str(JOB), "command": b"\xc3\x01encoded"}]},
    ("CommandReplies", 1): {"replies": [b"\xc3\x01encoded", b"\xc3\x01another"]},
    ("JobRequestApplied", 1): {"job_id": JOB, "version": 2, "at": AT, "request_id": "req-1",
                               "command": "PauseJob", "request_digest": "ab" * 32},
    # A handler's heartbeat carries its progress (v2).
    ("AttemptProgressed", 1): {**RUN_EVENT, **ATTEMPT, "details": b'{"done":3,"of":10}',
                               "progressed_at": AT},
    ("HeartbeatReport", 2): {"run_id": RUN, "job_id": JOB, **ATTEMPT, "at": AT,
                             "details": b'{"done":3,"of":10}'},
    # Workers you can see (issue 36 item 4).
    ("WorkerAnnounced", 1): {"worker_id": "host-1-4242", "host": "host-1",
                             "queues": ["default", "reports"], "handlers": ["echo", "backup"],
                             "slots": 32, "slots_in_use": 3, "version": "0.1.0", "at": AT},
    # Re-driving a dead letter (issue 37 item 4).
    ("RedriveRun", 1): {**COMMAND, "run_id": RUN, "correlation_id": "c0ffee",
                        "requested_by": "acme"},
    ("RunRedriven", 1): {**RUN_EVENT, "request_id": "req-1", "requested_by": "acme",
                         "attempts_before": 3},
    # Each attempt of an alert's delivery, recorded by the notifier (issue 37 item 3).
    ("AlertDeliveryAttempted", 1): {
        "delivery_id": UUID("de11e000-1111-5222-8333-444444444444"),
        "alert_id": UUID("a1e27000-1111-5222-8333-444444444444"), "tenant": "acme",
        "job_id": JOB, "job_name": "nightly", "kind": "failed", "run_id": RUN,
        "run_attempt": 2, "digest_count": 0, "message": "attempt 2 failed: exit status 1",
        "channel_id": UUID("c4a77e10-1111-5222-8333-444444444444"), "channel_name": "ops-hook",
        "channel_kind": "webhook", "attempt": 1, "outcome": "retrying", "status_code": 503,
        "latency_ms": 84, "error": "HTTP 503 Service Unavailable", "sent_at": AT,
        "next_attempt_at": AT},
    # A short run's start reported with its end: one report, one event (issue 34).
    ("AttemptSucceeded", 2): {**RUN_EVENT, **ATTEMPT, "finished_at": AT, "output": b"ok",
                              "output_truncated": False, "started_at": AT},
    ("WorkerReports", 2): {"worker": "w-1", "started": [
        {"run_id": RUN, "job_id": JOB, "attempt": 1, "started_at": AT}], "finished": [
        {"run_id": RUN, "job_id": JOB, "attempt": 2, "finished_at": AT, "outcome": "succeeded",
         "output": b"out", "output_truncated": False, "error": None, "started_at": AT}]},
}
