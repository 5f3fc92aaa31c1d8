"""Every cronlog metric, declared once: name, type, help, labels and buckets. Wiring takes
these objects (RoleMetrics.counter(WORKER_START_LAG)...), never a name string, so a metric
named in the alert rules (deploy/prometheus/) or the docs cannot drift from the code
(tests/unit/infra/test_metrics_catalogue.py).

Conventions (Prometheus'): the `cronlog_` prefix, base units (seconds, messages), counters
end in `_total`, latencies are histograms. Labels have bounded values only: queues and
handlers an operator declares or registers, outcomes, reasons; tenants only as the top
IN_FLIGHT_TOP_TENANTS plus "other" unless an operator asks for every tenant.

Pure data: importing this module imports no metrics library and registers nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]
Role = Literal["scheduler", "worker", "projector", "api", "notifier"]
ROLES: tuple[Role, ...] = ("scheduler", "worker", "projector", "api", "notifier")

# The design's service-level objective: runs start within 2 s of their time at p99. It is a
# bucket edge of the start-lag histograms, so the SLO's quantile is read from a real
# boundary, not interpolated across one.
START_LAG_SLO_SECONDS = 2.0
# The in-flight gauge names this many tenants with the most runs in flight, the rest as
# "other": at 50M jobs a label per tenant would be a series per tenant per scheduler.
IN_FLIGHT_TOP_TENANTS = 20
OTHER_TENANTS = "other"

# Latencies around the start-lag SLO: fine below it, coarse above.
START_LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, START_LAG_SLO_SECONDS, 3.0,
                     5.0, 10.0, 30.0, 60.0, 300.0)
# What is left of the lookahead when a dispatch becomes readable: 2 s dense, 60 s sparse.
START_LEAD_BUCKETS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 5.0, 10.0, 30.0, 60.0)
# Handlers run from milliseconds to the longest timeouts people set (an hour).
HANDLER_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
                   3600.0)
# One owner cycle or commit, one catch-up, one gRPC call.
SHORT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CATCH_UP_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# Messages or events per owner cycle: at most CRONLOG_OWNER_BATCH (2000) of each kind.
PER_CYCLE_BUCKETS = (0.0, 1.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 2000.0, 5000.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    # The roles that export it; every role when empty.
    roles: tuple[Role, ...] = ()

    def exported_by(self, role: Role) -> bool:
        return not self.roles or role in self.roles


def _m(name: str, kind: Kind, help: str, labels: tuple[str, ...] = (),
       buckets: tuple[float, ...] = (), roles: tuple[Role, ...] = ()) -> MetricSpec:
    return MetricSpec(name, kind, help, labels, buckets, roles)


# Every role.
READY = _m("cronlog_ready", "gauge",
           "1 while the role's /readyz answers 200, 0 while it answers 503", ("role",))
KAFKA_CONSUMER_LAG = _m(
    "cronlog_kafka_consumer_lag_messages", "gauge",
    "Messages between a consumer's committed position and the end of the log, summed over "
    "the partitions it is assigned (librdkafka statistics); for a worker, its queue's depth",
    ("client", "topic"))
KAFKA_BROKERS_UP = _m("cronlog_kafka_brokers_up", "gauge",
                      "Brokers a Kafka client is connected to (librdkafka statistics)",
                      ("client",))
KAFKA_QUEUED_MESSAGES = _m(
    "cronlog_kafka_queued_messages", "gauge",
    "Messages waiting in a Kafka client to be sent or handed over (librdkafka statistics)",
    ("client",))
KAFKA_BROKER_RTT = _m(
    "cronlog_kafka_broker_rtt_seconds", "gauge",
    "The slowest connected broker's average round trip (librdkafka statistics)", ("client",))

# Scheduler: the partition owners.
SCHEDULER_START_LEAD = _m(
    "cronlog_scheduler_start_lead_seconds", "histogram",
    "Time left before a run's start when its dispatch became readable to workers (the "
    "transaction committed); below half the lookahead the owner is falling behind",
    ("queue",), START_LEAD_BUCKETS, ("scheduler",))
SCHEDULER_LOOKAHEAD = _m("cronlog_scheduler_lookahead_seconds", "gauge",
                         "The lookahead the owner fires with now (CRONLOG_LOOKAHEAD_MS, widened "
                         "while cycles are slow)", (), (), ("scheduler",))
SCHEDULER_CYCLE_DURATION = _m("cronlog_scheduler_cycle_duration_seconds", "histogram",
                              "One owner cycle, from its poll's return to its events applied",
                              (), SHORT_BUCKETS,
                              ("scheduler",))
SCHEDULER_COMMIT_DURATION = _m("cronlog_scheduler_commit_duration_seconds", "histogram",
                               "Committing one cycle's Kafka transaction", (), SHORT_BUCKETS,
                               ("scheduler",))
SCHEDULER_CYCLE_MESSAGES = _m("cronlog_scheduler_cycle_messages", "histogram",
                              "Inbox messages handled per cycle", (), PER_CYCLE_BUCKETS,
                              ("scheduler",))
SCHEDULER_CYCLE_EVENTS = _m("cronlog_scheduler_cycle_events", "histogram",
                            "Events written per cycle", (), PER_CYCLE_BUCKETS, ("scheduler",))
SCHEDULER_OWNED_PARTITIONS = _m("cronlog_scheduler_owned_partitions", "gauge",
                                "Inbox partitions this scheduler owns and has caught up", (), (),
                                ("scheduler",))
SCHEDULER_FOLLOWERS_PENDING = _m(
    "cronlog_scheduler_calendar_followers_pending", "gauge",
    "Jobs of the owned partitions told of a newer version of their calendar and not yet "
    "applied to it (docs/calendars.md)", (), (), ("scheduler",))
SCHEDULER_TAKEOVERS = _m("cronlog_scheduler_takeovers_total", "counter",
                         "Partitions taken over (a new epoch taken in Postgres)", (), (),
                         ("scheduler",))
SCHEDULER_CATCH_UP_DURATION = _m("cronlog_scheduler_catch_up_duration_seconds", "histogram",
                                 "Replaying a taken-over partition's events before it fires",
                                 (), CATCH_UP_BUCKETS, ("scheduler",))
SCHEDULER_RUNS_CREATED = _m("cronlog_scheduler_runs_created_total", "counter",
                            "Runs created (fired, triggered, backfilled)", ("queue",), (),
                            ("scheduler",))
SCHEDULER_RUNS_MISSED = _m("cronlog_scheduler_runs_missed_total", "counter",
                           "Fire times recorded as missed (misfire policy)", ("queue",), (),
                           ("scheduler",))
SCHEDULER_RUNS_SKIPPED = _m("cronlog_scheduler_runs_skipped_total", "counter",
                            "Fire times recorded as skipped (overlap policy)", ("queue",), (),
                            ("scheduler",))
SCHEDULER_RUNS_FINISHED = _m("cronlog_scheduler_runs_finished_total", "counter",
                             "Runs ended, by final status (succeeded, failed, cancelled, ...)",
                             ("queue", "status"), (), ("scheduler",))
SCHEDULER_RUNS_DEAD_LETTERED = _m("cronlog_scheduler_runs_dead_lettered_total", "counter",
                                  "Runs out of retries, sent to the dead-letter topic",
                                  ("queue",), (), ("scheduler",))
SCHEDULER_IN_FLIGHT = _m(
    "cronlog_scheduler_in_flight_runs", "gauge",
    f"Runs created and not ended (dispatched, running, waiting for a retry or held), by "
    f"tenant: the top {IN_FLIGHT_TOP_TENANTS} tenants, "
    f"the rest as {OTHER_TENANTS!r}", ("tenant",), (), ("scheduler",))
SCHEDULER_POISON = _m("cronlog_scheduler_messages_set_aside_total", "counter",
                      "Inbox messages set aside to the poison topic (undecodable, failing)",
                      (), (), ("scheduler",))
SCHEDULER_REJECTED = _m("cronlog_scheduler_commands_rejected_total", "counter",
                        "Commands refused by the owner, by the status told to the caller",
                        ("code",), (), ("scheduler",))
SCHEDULER_OVER_BUDGET = _m("cronlog_scheduler_cycles_over_budget_total", "counter",
                           "Owner cycles that stopped taking work for their time budget "
                           "(CRONLOG_OWNER_CYCLE_BUDGET_MS)", (), (), ("scheduler",))
SCHEDULER_CARRIED = _m("cronlog_scheduler_messages_carried_total", "counter",
                       "Inbox messages a cycle polled and left to the next for its budget",
                       (), (), ("scheduler",))
SCHEDULER_DEFERRED = _m("cronlog_scheduler_messages_deferred_total", "counter",
                        "Inbox messages a cycle left to the next because their tenant had "
                        "spent its share of the cycle, or that waited behind one",
                        (), (), ("scheduler",))

# Worker: labelled by the queue each of its loops serves.
WORKER_START_LAG = _m(
    "cronlog_worker_start_lag_seconds", "histogram",
    "From a run's due time (not_before) to its handler's start", ("queue",),
    START_LAG_BUCKETS, ("worker",))
WORKER_LATE_STARTS = _m(
    "cronlog_worker_late_starts_total", "counter",
    "Starts more than 500 ms late, by cause: arrived_late (the dispatch reached the worker "
    "after its due time) or waited_here (no free slot, or the loop busy)",
    ("queue", "cause"), (), ("worker",))
WORKER_HANDLER_DURATION = _m(
    "cronlog_worker_handler_duration_seconds", "histogram",
    "A handler's run, by handler (unregistered names as 'unknown') and outcome (succeeded, "
    "failed, timed_out, cancelled, stopped_by_force)", ("queue", "handler", "outcome"),
    HANDLER_BUCKETS, ("worker",))
WORKER_BUSY_SLOTS = _m("cronlog_worker_busy_slots", "gauge", "Handler slots running a handler",
                       ("queue",), (), ("worker",))
WORKER_FREE_SLOTS = _m("cronlog_worker_free_slots", "gauge", "Handler slots free",
                       ("queue",), (), ("worker",))
WORKER_TENANT_BUSY_SLOTS = _m(
    "cronlog_worker_tenant_busy_slots", "gauge",
    f"Handler slots running a handler, by tenant: the top {IN_FLIGHT_TOP_TENANTS} tenants, the "
    f"rest as {OTHER_TENANTS!r}", ("queue", "tenant"), (), ("worker",))
WORKER_TENANT_SHARE = _m(
    "cronlog_worker_tenant_share_ratio", "gauge",
    "The share of a worker's slots one tenant may hold while another tenant is present "
    "(CRONLOG_WORKER_TENANT_SHARE)", ("queue",), (), ("worker",))
WORKER_HELD_DISPATCHES = _m("cronlog_worker_held_dispatches", "gauge",
                            "Dispatches received and held until their time or a free slot",
                            ("queue",), (), ("worker",))
WORKER_REPORTS_PENDING = _m(
    "cronlog_worker_reports_pending", "gauge",
    "Start and finish reports gathered and not yet sent, plus report messages sent and not "
    "acknowledged by the log (or waiting to be sent again)", ("queue",), (), ("worker",))
WORKER_ASSIGNED_PARTITIONS = _m(
    "cronlog_worker_assigned_partitions", "gauge",
    "Partitions of the queue's dispatch topic assigned to this worker", ("queue",), (),
    ("worker",))
WORKER_ATTEMPTS_CANCELLED = _m(
    "cronlog_worker_attempts_cancelled_total", "counter",
    "Attempts the owner cancelled that reached this worker, by stage: held (dropped before "
    "start) or running (the handler told to stop)", ("queue", "stage"), (), ("worker",))
WORKER_ATTEMPTS_LOST = _m(
    "cronlog_worker_attempts_lost_total", "counter",
    "Attempts this worker gave up reporting (the owner will find them lost when their "
    "heartbeats stop), by reason", ("queue", "reason"), (), ("worker",))

# History projector.
PROJECTOR_EVENTS_APPLIED = _m("cronlog_projector_events_applied_total", "counter",
                              "Events written to the ClickHouse history, by event (RunSucceeded, "
                              "JobCreated, ...: the schema's names, a bounded set)", ("event",),
                              (), ("projector",))
PROJECTOR_LAG_SECONDS = _m(
    "cronlog_projector_lag_seconds", "gauge",
    "Age of the newest event applied, while events are waiting (0 when caught up)", (), (),
    ("projector",))
PROJECTOR_LAG_MESSAGES = _m("cronlog_projector_lag_messages", "gauge",
                            "Events not yet applied to the history: the log past the "
                            "consumer's position, plus the batch being stored", (), (),
                            ("projector",))
PROJECTOR_REJECTED_EVENTS = _m("cronlog_projector_rejected_events_total", "counter",
                               "Events set aside instead of projected, by reason", ("reason",),
                               (), ("projector",))

# Notifier (docs/alerts.md).
NOTIFIER_ALERTS_READ = _m("cronlog_notifier_alerts_read_total", "counter",
                          "Alert records read from the alerts topic", (), (), ("notifier",))
NOTIFIER_ATTEMPTS = _m("cronlog_notifier_attempts_total", "counter",
                       "Delivery attempts, by channel kind and where the delivery stands "
                       "after (delivered, retrying, failed)", ("channel_kind", "outcome"),
                       (), ("notifier",))
NOTIFIER_HELD = _m("cronlog_notifier_deliveries_held", "gauge",
                   "Deliveries held: pending, waiting for a retry, or being sent", (), (),
                   ("notifier",))

# api.
API_REQUESTS = _m("cronlog_api_requests_total", "counter",
                  "gRPC requests answered, by method and status code", ("method", "code"),
                  (), ("api",))
API_REQUEST_DURATION = _m("cronlog_api_request_duration_seconds", "histogram",
                          "gRPC request latency, by method", ("method",), SHORT_BUCKETS,
                          ("api",))

API_REFUSALS = _m("cronlog_api_refusals_total", "counter",
                  "gRPC calls refused RESOURCE_EXHAUSTED by the tenant's budget, by reason "
                  "(command_rate, read_rate, tenant_share)", ("reason",), (), ("api",))

API_LIVE_WORKERS = _m("cronlog_api_live_workers", "gauge",
                      "Live workers serving each declared queue, as this api read the workers "
                      "topic (docs/workers.md)", ("queue",), (), ("api",))

CATALOGUE: tuple[MetricSpec, ...] = tuple(
    v for v in list(globals().values()) if isinstance(v, MetricSpec))


def for_role(role: Role) -> tuple[MetricSpec, ...]:
    return tuple(spec for spec in CATALOGUE if spec.exported_by(role))


def by_name() -> dict[str, MetricSpec]:
    return {spec.name: spec for spec in CATALOGUE}
