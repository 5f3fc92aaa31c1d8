"""Process configuration: the Settings every role is built from (config_env reads them from
the environment)."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta

from cronlog.domain.limits import TenantLimits
from cronlog.domain.partition_layout import LayoutError, PartitionLayout

# The worker's built-in handlers (worker/built_in_handlers.py), shared by default when tokens are on;
# all but `command`, which runs programs on the worker's host: shared only when operators say.
BUILT_IN_HANDLER_NAMES = ("echo", "sleep", "fail", "http")


class ConfigError(ValueError):
    """An environment variable holds a value cronlog cannot use."""


@dataclass(frozen=True)
class Analyst:
    """A read-only ClickHouse user that sees one tenant's rows of the history
    (`cronlog provision`, docs/analytics.md)."""

    tenant: str
    user: str
    password: str = field(repr=False)


def default_instance_id() -> str:
    """A scheduler id no other process shares. The id names the owner's transactional
    producer, and a second process with the same one fences the first; zombies are fenced by
    the consumer group's metadata (KIP-447), so nothing needs the id to outlive a process."""
    return f"scheduler-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap: str = "127.0.0.1:9092"
    postgres_dsn: str = "postgresql://cronlog@127.0.0.1:5433/cronlog"
    clickhouse_host: str = "127.0.0.1"
    clickhouse_port: int = 9000
    clickhouse_database: str = "cronlog"
    clickhouse_user: str = "default"
    # Kept out of repr so that logging Settings never prints it.
    clickhouse_password: str = field(default="", repr=False)
    # TLS to ClickHouse's secure native port, the server's certificate checked against
    # clickhouse_ca_file (empty: the system's authorities) unless clickhouse_verify is off.
    clickhouse_secure: bool = False
    clickhouse_verify: bool = True
    clickhouse_ca_file: str = ""
    # Per-tenant analyst users `cronlog provision` keeps on ClickHouse (CRONLOG_ANALYSTS);
    # None: not managed, whatever analysts exist are left as they are.
    analysts: tuple[Analyst, ...] | None = field(default=None, repr=False)
    # The ClickHouse server's users.d-style folder, where provision writes the analysts'
    # users file (CRONLOG_CLICKHOUSE_USERS_DIR); empty: SQL access control, where the
    # server has it. And the networks analysts may sign in from (CRONLOG_ANALYST_NETWORKS).
    clickhouse_users_dir: str = ""
    analyst_networks: tuple[str, ...] = ("127.0.0.1", "::1")
    # The operator's librdkafka settings for every Kafka client (config_connections.py): SASL and
    # TLS among them, so kept out of repr like the password above.
    kafka_config: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    topic_prefix: str = "cronlog."
    # Logical partitions: the unit of ownership (epochs), of the due index and of every
    # projection row (CRONLOG_PARTITIONS). And the Kafka partitions of every topic
    # (CRONLOG_KAFKA_PARTITIONS): None is the same count, each logical partition its own
    # Kafka partition, as before issue 34; fewer must divide the logical count
    # (docs/partitions.md, "How to pick K").
    partitions: int = 8
    kafka_partitions: int | None = None
    # Copies of every topic's partitions (`cronlog provision`), and how many must have a
    # write before it counts: 1/1 on a one-broker development stack, 3/2 on a cluster.
    topic_replication_factor: int = 1
    topic_min_insync_replicas: int = 1
    # Topic retention in days (docs/operations.md, "Topics"); 0 is each one's default: job
    # events forever (the audit trail), run events the history retention plus 7 days,
    # dispatch topics the history retention. Run events and dispatches are never kept less
    # than the history retention (`cronlog provision` refuses it).
    job_events_retention_days: int = 0
    run_events_retention_days: int = 0
    dispatch_retention_days: int = 0
    inbox_retention_days: int = 7
    grpc_address: str = "127.0.0.1:50051"
    # (tenant, bearer token) pairs the api accepts; none means the api runs open, without
    # authentication. Kept out of repr so that logging Settings never prints a token.
    tenant_tokens: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Open mode (no tokens) binds only loopback addresses unless this says open is meant.
    api_open: bool = False
    # PEM files of the api's TLS certificate chain and key; both empty means plaintext.
    tls_cert: str = ""
    tls_key: str = ""
    # The api's own budget (infra/grpc/tenant_budget.py): its server threads, the calls it
    # takes at once (more are RESOURCE_EXHAUSTED before any thread), the share of the threads
    # one tenant's calls may hold, and each tenant's token buckets: commands (a CreateJobs
    # costs its items) and expensive reads, a rate per second and a burst.
    api_threads: int = 32
    api_max_concurrent_rpcs: int = 64
    api_tenant_share: float = 0.5
    tenant_command_rate: float = 500.0
    tenant_command_burst: int = 5000
    tenant_read_rate: float = 100.0
    tenant_read_burst: int = 500
    # How far ahead of a fire time the owner pre-enqueues the run; workers hold it until due.
    # Longer than a killed scheduler's detection (the session timeout) and takeover, so the
    # runs of its partitions are at the workers before the next owner has them (issue 34).
    lookahead: timedelta = timedelta(seconds=8)
    # Jobs whose runs are at least this far apart (one-off jobs, cron jobs that fire every
    # minute or less often) are pre-enqueued this far ahead: a top-of-hour or midnight burst
    # reaches the workers over the minute before it (docs/lifecycle.md, docs/benchmarks.md).
    sparse_lookahead: timedelta = timedelta(seconds=60)
    # A scheduler leaving on purpose (SIGTERM) first dispatches everything due this far
    # ahead, so its partitions' runs are not late while the next owner takes them.
    handover_reach: timedelta = timedelta(seconds=5)
    # How long the schedulers' group waits for a silent owner before moving its partitions:
    # the brokers' least by default. A killed scheduler's dense runs start up to this plus
    # the takeover less the lookahead late (docs/operations.md, "Failover timing").
    owner_session_timeout: timedelta = timedelta(seconds=6)
    # Fire times later than this are misfires, handled by the job's misfire policy.
    catch_up_window: timedelta = timedelta(seconds=60)
    # A dispatched attempt no worker starts within this of its time is lost and retried.
    start_timeout: timedelta = timedelta(minutes=5)
    # How long one owner cycle may wait for inbox messages before it looks at due jobs again.
    owner_poll: timedelta = timedelta(milliseconds=100)
    # At most this many inbox messages, and this many due jobs, per owner cycle (and so per
    # Kafka transaction): larger batches spread each transaction's fixed cost wider.
    owner_batch: int = 2000
    # How long one owner cycle decides before it commits what it has (issue 33): the rest
    # of its polled messages and due jobs go to the next cycle. Well under the lookahead (a
    # cycle's length is lost from the runs' lead), the session timeout and the consumer's
    # max.poll.interval (infra/kafka/owner_transport.py): commands/owner/cycle_budget.py.
    owner_cycle_budget: timedelta = timedelta(milliseconds=500)
    reply_timeout: timedelta = timedelta(seconds=15)
    # The queues operators declared: `cronlog provision` creates their dispatch topics, and a
    # job may name only these (a request never creates a topic).
    queues: tuple[str, ...] = ("default",)
    # The declared queues this worker process serves; empty means every declared queue.
    worker_queues: tuple[str, ...] = ()
    # Per-tenant allow-lists. A tenant listed may use only its queues (all declared) and its
    # handlers. A tenant not listed may use, when the api runs open, every declared queue and
    # any handler; with tenant tokens, only the shared queues and handlers below
    # (commands/queue_catalog.py, docs/security.md).
    tenant_queues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tenant_handlers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # What every tenant without an allow-list may use when tokens are on: the default queue
    # (when declared) and the built-in handlers, unless the operator says otherwise.
    shared_queues: tuple[str, ...] = ("default",)
    shared_handlers: tuple[str, ...] = BUILT_IN_HANDLER_NAMES
    worker_slots: int = 16
    # The share of a worker's slots one tenant may hold while another tenant is present at
    # that worker (a dispatch held, a run, a start within the last minute); a tenant alone
    # may use every slot (worker/slot_share.py). A fraction in (0, 1].
    worker_tenant_share: float = 0.5
    heartbeat_interval: timedelta = timedelta(seconds=10)
    # How long a handler told to stop (cancelled, or past its timeout) has before it is
    # stopped by force.
    cancel_grace: timedelta = timedelta(seconds=5)
    history_retention: timedelta = timedelta(days=90)
    # CPU priority the history projector lowers itself by (0-19, as `nice`).
    projector_nice: int = 10
    # Niceness increment the worker takes at start (-20 to 19, as `nice`). Negative: on a
    # shared machine a due run waits for no bookkeeping (needs CAP_SYS_NICE, else ignored).
    worker_nice: int = -5
    tenant_limits: TenantLimits = field(default_factory=TenantLimits)
    # Python modules with a register(registry) function that adds custom handlers.
    handler_modules: tuple[str, ...] = ()
    # `module[:attr]` items naming cronlog.sdk @handler functions (worker/user_handlers.py),
    # besides the installed packages' `cronlog.handlers` entry points.
    worker_handlers: tuple[str, ...] = ()
    # Operator exceptions to the http handler's outbound fence (commands/outbound.py):
    # CIDRs, addresses, host names, each optionally with :port.
    http_allow: tuple[str, ...] = ()
    # The `command` handler (config_commands.py, docs/handlers.md): the programs it may run
    # (absolute paths or globs; none by default), the user they run as, the SIGTERM to
    # SIGKILL grace.
    command_allow: tuple[str, ...] = ()
    command_user: str = ""
    command_grace_seconds: float = 10.0
    worker_id: str = ""
    # Alert deliveries (config_alerts.py, docs/alerts.md): the operator's SMTP server for
    # e-mail channels ("" host: e-mail is off), STARTTLS and the login, whose password is
    # read from smtp_password_file at start and kept out of repr; and how long a webhook or
    # Slack receiver has to take the connection, and then to answer.
    smtp_host: str = ""
    smtp_port: int = 25
    smtp_from: str = ""
    smtp_starttls: bool = False
    smtp_username: str = ""
    smtp_password_file: str = ""
    smtp_password: str = field(default="", repr=False)
    alert_http_timeout: timedelta = timedelta(seconds=5)
    # The key every webhook channel's signing secret derives from (issue 37), read from
    # alert_signing_key_file at start and kept out of repr; b"": webhook channels cannot
    # be created.
    alert_signing_key_file: str = ""
    alert_signing_key: bytes = field(default=b"", repr=False)
    # The notifier (docs/alerts.md): one message per job and kind per alert_throttle, the
    # rest in a digest; retries from alert_retry_base, doubling up to an hour, for
    # alert_retry_for after the first attempt; at most notifier_senders attempts at once.
    alert_throttle: timedelta = timedelta(minutes=1)
    alert_retry_base: timedelta = timedelta(seconds=5)
    alert_retry_for: timedelta = timedelta(days=1)
    notifier_senders: int = 8
    # Each role's /metrics, /healthz and /readyz port (infra/observability); 0 serves none.
    # Loopback unless metrics_host says otherwise: the numbers name tenants and queues.
    metrics_host: str = "127.0.0.1"
    api_metrics_port: int = 0
    scheduler_metrics_port: int = 0
    worker_metrics_port: int = 0
    projector_metrics_port: int = 0
    notifier_metrics_port: int = 0
    # The console (`cronlog console`): where it listens, loopback unless console_remote says
    # otherwise (it holds signed-in tenants' tokens); cookies marked Secure when it is served
    # over HTTPS (a TLS proxy in front); the api's CA for TLS, as the CLI's CRONLOG_TLS_CA.
    console_address: str = "127.0.0.1:8080"
    console_remote: bool = False
    console_secure_cookie: bool = False
    # The Host names it answers to (DNS rebinding; infra/console/hosts.py); each page's time
    # limit; its ClickHouse connections and the share of them (and of its page threads) one
    # tenant may hold at once; the sessions one tenant may hold (docs/console.md).
    console_hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
    console_page_seconds: float = 5.0
    console_history_connections: int = 4
    console_tenant_share: float = 0.5
    console_tenant_sessions: int = 100
    api_ca_file: str = ""
    instance_id: str = field(default_factory=default_instance_id)
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Refused when configured, not when the first owner takes its partitions.
        try:
            PartitionLayout(self.partitions, self.kafka_partitions or self.partitions)
        except LayoutError as exc:
            raise ConfigError(f"CRONLOG_PARTITIONS={self.partitions}, CRONLOG_KAFKA_PARTITIONS="
                              f"{self.kafka_partitions}: {exc}") from None

    @property
    def layout(self) -> PartitionLayout:
        return PartitionLayout(self.partitions, self.kafka_partitions or self.partitions)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"

    @property
    def inbox_topic(self) -> str:
        return self.topic("inbox")

    @property
    def job_events_topic(self) -> str:
        return self.topic("job-events")

    @property
    def run_events_topic(self) -> str:
        return self.topic("run-events")

    @property
    def replies_topic(self) -> str:
        return self.topic("replies")

    @property
    def dead_letters_topic(self) -> str:
        return self.topic("dead-letters")

    @property
    def alerts_topic(self) -> str:
        return self.topic("alerts")

    @property
    def alert_deliveries_topic(self) -> str:
        return self.topic("alert-deliveries")

    @property
    def poison_topic(self) -> str:
        return self.topic("poison")

    @property
    def workers_topic(self) -> str:
        return self.topic("workers")

    def dispatch_topic(self, queue: str) -> str:
        return self.topic(f"dispatch.{queue}")

    @property
    def served_queues(self) -> tuple[str, ...]:
        return self.worker_queues or self.queues

    @property
    def group_prefix(self) -> str:
        return self.topic_prefix.rstrip(".")

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]
