"""Every CRONLOG_* setting, declared once: its name, the value it takes unset, and what it
means. docs/configuration.md is rendered from this table (`make docs`, the cronlog-dev
tool), the misspelt-setting warning (setting_names.py) knows the names read outside
`settings_from_env` from it, and a unit test fails when the parser reads a name that has no
entry here, an entry names nothing the parser reads, or a default here is not the parser's
(tests/unit/infra/test_setting_catalogue.py).

A reference to another page is written `docs/page.md` in a meaning; the rendered page links
it. Pure data: importing this module reads no environment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Who reads a name: the processes' Settings (config_env.settings_from_env), the `cronlog`
# command before or beside them (the env file, the client's token), or logging.
Reader = Literal["settings", "command", "logging"]


@dataclass(frozen=True)
class SettingDoc:
    name: str  # CRONLOG_X, or a family CRONLOG_X_<part> with a variable part
    meaning: str
    default: str = ""  # the value it takes unset, as one would write it; "" when none
    default_words: str = ""  # a default no written value states ("every declared queue")
    read_by: Reader = "settings"

    @property
    def family_prefix(self) -> str | None:
        """CRONLOG_ANALYST_PASSWORD_ for CRONLOG_ANALYST_PASSWORD_<user>, else None."""
        head, sep, _ = self.name.partition("<")
        return head if sep else None


S = SettingDoc
SECTIONS: tuple[tuple[str, tuple[SettingDoc, ...]], ...] = (
    ("The servers", (
        S("CRONLOG_KAFKA_BOOTSTRAP", "Kafka bootstrap servers", "127.0.0.1:9092"),
        S("CRONLOG_KAFKA_CONFIG",
          "librdkafka settings for every Kafka client, one `key=value` a line "
          "(`security.protocol=SASL_SSL`, `sasl.mechanism=SCRAM-SHA-512`, `sasl.username`, "
          "`sasl.password`, `ssl.ca.location`, …); settings cronlog relies on (idempotence, "
          "`read_committed`, transactional ids, groups, partitioner) are refused at start "
          "(docs/security.md)"),
        S("CRONLOG_KAFKA_CONFIG_FILE",
          "a file of the same lines (keeps the password out of the environment), merged with "
          "the above; a key in both is an error"),
        S("CRONLOG_POSTGRES_DSN",
          "Postgres connection string; user, password and TLS go in the DSN "
          "(`?sslmode=verify-full&sslrootcert=…`)",
          "postgresql://cronlog@127.0.0.1:5433/cronlog"),
        S("CRONLOG_CLICKHOUSE_HOST", "ClickHouse's host (native protocol)", "127.0.0.1"),
        S("CRONLOG_CLICKHOUSE_PORT", "ClickHouse's native protocol port", "9000"),
        S("CRONLOG_CLICKHOUSE_DATABASE", "the ClickHouse database of the run history",
          "cronlog"),
        S("CRONLOG_CLICKHOUSE_USER", "ClickHouse user (the local stack's is `cronlog`)",
          "default"),
        S("CRONLOG_CLICKHOUSE_PASSWORD",
          "its password (the local stack makes its own, kept in `.cronlog/<stack>/secrets/`; "
          "docs/outbound.md)"),
        S("CRONLOG_CLICKHOUSE_SECURE",
          "`1`: TLS to ClickHouse's secure native port (set `CRONLOG_CLICKHOUSE_PORT` to it, "
          "usually 9440)", "0"),
        S("CRONLOG_CLICKHOUSE_CA_FILE",
          "PEM authorities for the ClickHouse server's certificate (default: the system's)"),
        S("CRONLOG_CLICKHOUSE_VERIFY",
          "`0` skips the ClickHouse certificate and host-name check (testing only)", "1"),
    )),
    ("Analysts of the run history", (
        S("CRONLOG_CLICKHOUSE_USERS_DIR",
          "the ClickHouse server's users.d folder, where `cronlog provision` writes the "
          "per-tenant analysts' users file (`make run` sets its own); unset: analysts are made "
          "with SQL on a server with access control (docs/analytics.md, \"Per-tenant analyst "
          "users\")"),
        S("CRONLOG_ANALYSTS",
          "`tenant:user,...`: the per-tenant analyst users `cronlog provision` keeps, each "
          "reading only its tenant's copy of the history; set (even empty), exactly these"),
        S("CRONLOG_ANALYST_PASSWORDS_FILE",
          "their passwords: a file of `user password` lines"),
        S("CRONLOG_ANALYST_PASSWORD_<user>", "an analyst's password, one variable per user"),
        S("CRONLOG_ANALYST_NETWORKS", "addresses or networks the analysts may sign in from",
          "127.0.0.1,::1"),
    )),
    ("Topics and partitions", (
        S("CRONLOG_TOPIC_PREFIX", "prefix of every topic and consumer group", "cronlog."),
        S("CRONLOG_PARTITIONS",
          "logical partitions: the unit of ownership (epochs), of the due index and of every "
          "projection row (1,024 in production); docs/partitions.md", "8"),
        S("CRONLOG_KAFKA_PARTITIONS",
          "Kafka partitions of every job-keyed topic; must divide `CRONLOG_PARTITIONS` (a "
          "power of two such as 64 of 1,024); neither count changes after provisioning "
          "(docs/partitions.md)", default_words="`CRONLOG_PARTITIONS`"),
        S("CRONLOG_TOPIC_REPLICATION_FACTOR",
          "replicas of every topic (3 on a cluster); existing topics with fewer are refused",
          "1"),
        S("CRONLOG_TOPIC_MIN_INSYNC_REPLICAS",
          "set as `min.insync.replicas` on every topic (2 on a cluster); more than the "
          "replication factor is refused", "1"),
        S("CRONLOG_JOB_EVENTS_RETENTION_DAYS",
          "at least `CRONLOG_HISTORY_RETENTION_DAYS`; a finite value gives up rebuilding older "
          "jobs", default_words="forever"),
        S("CRONLOG_RUN_EVENTS_RETENTION_DAYS", "at least the history retention",
          default_words="history + 7"),
        S("CRONLOG_DISPATCH_RETENTION_DAYS", "at least the history retention",
          default_words="history"),
        S("CRONLOG_INBOX_RETENTION_DAYS", "how long unapplied commands and reports are kept",
          "7"),
    )),
    ("The api", (
        S("CRONLOG_GRPC_ADDRESS", "where the api listens", "127.0.0.1:50051"),
        S("CRONLOG_TENANT_TOKENS_FILE",
          "file of `tenant token` lines the api accepts as bearer tokens (docs/security.md); "
          "no tokens at all: the api runs open, with a warning"),
        S("CRONLOG_TENANT_TOKENS",
          "the same as `tenant=token,tenant=token`, merged with the file"),
        S("CRONLOG_TLS_CERT",
          "PEM certificate chain: with `CRONLOG_TLS_KEY`, the api serves TLS instead of "
          "plaintext"),
        S("CRONLOG_TLS_KEY", "PEM private key of `CRONLOG_TLS_CERT`"),
        S("CRONLOG_TLS_CA",
          "PEM authorities of the api's certificate: the `cronlog` client commands and the "
          "console talk TLS to the api with them (plaintext when unset)"),
        S("CRONLOG_API_OPEN",
          "without tenant tokens the api binds only a loopback address (`127.0.0.0/8`, `::1`, "
          "`localhost`, `unix:`) and refuses any other `CRONLOG_GRPC_ADDRESS` at start; `1` "
          "says an open api beyond this machine is meant", "0"),
        S("CRONLOG_QUEUES",
          "the queues operators declare; `cronlog provision` creates "
          "`<prefix>dispatch.<queue>` for each. A job naming any other queue is "
          "INVALID_ARGUMENT (`spec.queue`): requests never create topics. The api and workers "
          "refuse to start while a declared queue's topic is missing", "default"),
        S("CRONLOG_TENANT_QUEUES",
          "per-tenant queue allow-lists, `acme:default|batch,beta:batch`: a listed tenant may "
          "use only what it lists; a tenant not listed may use, with tenant tokens, only the "
          "shared queues (below), in open mode every declared queue (docs/security.md, "
          "\"Queues and handlers: closed by default with tokens\")"),
        S("CRONLOG_TENANT_HANDLERS",
          "per-tenant handler allow-lists, `acme:echo|http`: as `CRONLOG_TENANT_QUEUES`, for "
          "handlers (a tenant not listed, in open mode: any handler)"),
        S("CRONLOG_SHARED_QUEUES",
          "with tenant tokens, the queues (each declared) every tenant without an allow-list "
          "may use; `-` shares none; the default applies when a queue named `default` is "
          "declared", "default"),
        S("CRONLOG_SHARED_HANDLERS",
          "with tenant tokens, the handlers every tenant without an allow-list may use; `-` "
          "shares none", "echo,sleep,fail,http"),
        S("CRONLOG_TENANT_COMMAND_RATE",
          "each tenant's token bucket for commands at the api, per second; a `CreateJobs` "
          "costs one per item; over it, `RESOURCE_EXHAUSTED` with trailing `retry-after` "
          "seconds (docs/security.md, \"The api's own budget\")", "500"),
        S("CRONLOG_TENANT_COMMAND_BURST", "that bucket's size: the commands it takes at once",
          "5000"),
        S("CRONLOG_TENANT_READ_RATE",
          "each tenant's bucket for expensive reads (`PreviewSchedule`, `ListJobs`, "
          "`ListRuns`, `GetRun`, `ListCalendars`), per second", "100"),
        S("CRONLOG_TENANT_READ_BURST", "that bucket's size", "500"),
        S("CRONLOG_API_THREADS", "the api's gRPC worker threads", "32"),
        S("CRONLOG_API_MAX_CONCURRENT_RPCS",
          "the calls the api takes at once (running or waiting; more are "
          "`RESOURCE_EXHAUSTED`)", "64"),
        S("CRONLOG_API_TENANT_SHARE",
          "the share of the api's threads one tenant's calls may hold at once (16 of 32), a "
          "fraction greater than 0 and at most 1; more are `RESOURCE_EXHAUSTED` with "
          "`retry-after`", "0.5"),
        S("CRONLOG_REPLY_TIMEOUT_MS",
          "how long the api waits for an owner's reply to a command that came without a gRPC "
          "deadline; with one, it waits until just before the caller's deadline (at most 2 "
          "minutes). Unanswered, the error names the inbox partition and what it was waiting "
          "for (docs/operations.md, \"Ready means ready\")", "15000"),
        S("CRONLOG_TENANT_MAX_JOBS",
          "jobs a tenant may have (not deleted); CreateJob beyond it is RESOURCE_EXHAUSTED",
          "10000"),
    )),
    ("The schedulers", (
        S("CRONLOG_LOOKAHEAD_MS",
          "how early runs reach the workers; workers hold them until their time. An owner "
          "whose cycles take long fires further ahead by what they lose beyond half of this, "
          "up to twice this (docs/lifecycle.md). Longer than the session timeout and a "
          "takeover, so a killed scheduler's runs are at the workers before the next owner "
          "has its partitions (docs/operations.md, \"Failover timing\"). A pause cancels the "
          "runs already enqueued; the in-flight limit counts those due within 2 s", "8000"),
        S("CRONLOG_SPARSE_LOOKAHEAD_MS",
          "how early the runs of one-off jobs and of cron jobs a minute or more apart are "
          "pre-enqueued, so a midnight or top-of-hour burst reaches the workers over the "
          "minute before it; at most `CRONLOG_LOOKAHEAD_MS` turns it off (docs/lifecycle.md, "
          "docs/benchmarks.md)", "60000"),
        S("CRONLOG_CATCH_UP_WINDOW_MS",
          "fire times later than this are misfires, handled by the job's misfire policy "
          "(docs/guarantees.md, \"No silent skip\")", "60000"),
        S("CRONLOG_OWNER_POLL_MS",
          "how long one owner cycle waits for inbox messages before it looks at due jobs "
          "again", "100"),
        S("CRONLOG_OWNER_BATCH",
          "most inbox messages and due jobs an owner handles per cycle (one Kafka "
          "transaction)", "2000"),
        S("CRONLOG_OWNER_CYCLE_BUDGET_MS",
          "how long an owner cycle decides before it commits what it has (10 to 5,000): the "
          "rest of its inbox messages and due jobs go to the next cycle, so no tenant's work "
          "keeps an owner from polling (docs/operations.md, \"The cycle's budget\")", "500"),
        S("CRONLOG_INSTANCE_ID",
          "a scheduler's name (its transactional id), unique per process, so two schedulers "
          "started alike both work. A scheduler whose id a live one holds waits up to 11 s, "
          "then exits with code 3, as does one fenced later by a process with its id "
          "(supervisors: do not restart on 3)",
          default_words="`scheduler-<host>-<pid>-<random>`"),
        S("CRONLOG_HANDOVER_REACH_MS",
          "a scheduler told to stop (SIGTERM) first fires and dispatches everything due this "
          "far ahead (for at most 3 s), then leaves the group at once; a scheduler whose "
          "partitions move to one that joined does the same for them before letting them go: "
          "the runs of the partitions handed over are not late while their next owner takes "
          "them (docs/operations.md, \"Handing over\")", "5000"),
        S("CRONLOG_OWNER_SESSION_TIMEOUT_MS",
          "how long the schedulers' group waits for a silent scheduler (killed, frozen, cut "
          "off) before moving its partitions (6,000 to 300,000; the brokers' default floor). "
          "Dense jobs of a killed scheduler start up to this plus the takeover less the "
          "lookahead late (docs/operations.md, \"Failover timing\")",
          "6000"),
        S("CRONLOG_START_TIMEOUT_MS",
          "the start timeout of jobs that set none: a dispatched attempt that no worker "
          "starts within this of its time is lost and retried per the job's policy, and its "
          "queue alerted (docs/lifecycle.md)", "300000"),
        S("CRONLOG_TENANT_MAX_IN_FLIGHT",
          "runs a tenant may have scheduled or running; further due fire times wait", "1000"),
        S("CRONLOG_TENANT_LIMITS",
          "per-tenant overrides: `tenant:max_jobs:max_in_flight,...`"),
    )),
    ("The workers", (
        S("CRONLOG_WORKER_QUEUES", "comma-separated declared queues a worker serves",
          default_words="every declared queue"),
        S("CRONLOG_WORKER_SLOTS", "concurrent handlers per worker queue", "16"),
        S("CRONLOG_WORKER_TENANT_SHARE",
          "the share of a worker queue's slots one tenant may hold while another tenant is "
          "present at that worker (a dispatch held there, a run, a start in the last minute), "
          "a fraction greater than 0 and at most 1; free slots go to the tenants with due "
          "runs in turn, and a tenant alone uses every slot (docs/operations.md, \"Worker "
          "slots and tenants\")", "0.5"),
        S("CRONLOG_WORKER_ID",
          "the name a worker gives in its reports and log lines",
          default_words="`<host>-<queue>`"),
        S("CRONLOG_HEARTBEAT_INTERVAL_MS", "how often a worker reports its running attempts",
          "10000"),
        S("CRONLOG_CANCEL_GRACE_MS",
          "how long a handler told to stop (CancelRun, timeout) has before the worker stops it "
          "by force", "5000"),
        S("CRONLOG_HANDLER_MODULES", "modules whose `register(registry)` adds custom handlers"),
        S("CRONLOG_WORKER_HANDLERS",
          "`module[:attr]` items, comma-separated, naming `cronlog.sdk` `@handler` functions "
          "(a module: every one in it), loaded besides the `cronlog.handlers` entry points of "
          "installed packages; `cronlog worker --handlers` overrides it (docs/handlers.md)"),
        S("CRONLOG_HTTP_ALLOW",
          "CIDRs, addresses or host names, each optionally `:port`, that the `http` handler "
          "may reach although they are loopback, private or link-local; the deployment's own "
          "servers only with an entry naming their exact host and port (docs/outbound.md)"),
        S("CRONLOG_COMMAND_ALLOW",
          "programs the `command` handler may run: absolute paths or globs on absolute paths "
          "(`*` also matches `/`), comma-separated; a program is allowed when its path, or "
          "its path with symlinks resolved, matches. Unset, it runs nothing "
          "(docs/handlers.md)"),
        S("CRONLOG_COMMAND_USER",
          "the user `command` jobs run as; another than the worker's own only when the "
          "worker runs as root, else the worker refuses to start",
          default_words="the worker's own user"),
        S("CRONLOG_COMMAND_GRACE_SECONDS",
          "how long a command's process group told to stop (timeout, cancel, or its first "
          "process gone) has between SIGTERM and SIGKILL, 0 to 3600", "10"),
        S("CRONLOG_WORKER_NICE",
          "Niceness the worker adds to its own at start: negative raises its CPU priority, so "
          "on a machine shared with a scheduler a burst's due runs start before the reports "
          "of runs already going are recorded. Raising needs root or CAP_SYS_NICE; without it "
          "the worker logs a warning and runs at the usual priority", "-5"),
    )),
    ("Alerts to the job's owner", (
        S("CRONLOG_SMTP_HOST",
          "the SMTP server alerts to e-mail channels are sent through (a host name or "
          "address); unset, e-mail is off and each delivery to an e-mail channel fails, not "
          "retried, with `no SMTP server configured (CRONLOG_SMTP_HOST)` (docs/alerts.md)"),
        S("CRONLOG_SMTP_PORT", "its port (587 for submission with STARTTLS)", "25"),
        S("CRONLOG_SMTP_FROM",
          "the sender of alert e-mails, `alerts@example.com` or `cronlog "
          "<alerts@example.com>`; required with `CRONLOG_SMTP_HOST`"),
        S("CRONLOG_SMTP_STARTTLS",
          "`1`: every connection is upgraded with STARTTLS, the server's certificate checked "
          "for `CRONLOG_SMTP_HOST` against the system's authorities; a server that does not "
          "offer it fails each delivery", "0"),
        S("CRONLOG_SMTP_USERNAME",
          "the login at the SMTP server, with `CRONLOG_SMTP_PASSWORD_FILE`; only with "
          "`CRONLOG_SMTP_STARTTLS=1`, so that the password never travels in clear"),
        S("CRONLOG_SMTP_PASSWORD_FILE",
          "a file holding that login's password (one line, at most 4 KiB), read at start"),
        S("CRONLOG_ALERT_HTTP_TIMEOUT_MS",
          "how long a webhook or Slack receiver has to take the connection (TLS included), "
          "and then again to answer (100 to 60,000); a slower one fails the attempt, which is "
          "retried (docs/alerts.md)", "5000"),
        S("CRONLOG_ALERT_SIGNING_KEY_FILE",
          "a file of at least 32 random bytes (at most 4 KiB, used as they are: `head -c 32 "
          "/dev/urandom > key`), read at start, from which every webhook channel's signing "
          "secret derives with the channel's id and rotation; no secret is stored. Unset, "
          "creating a webhook channel is FAILED_PRECONDITION; changing it changes every "
          "channel's secret (docs/alerts.md, \"Channels\")"),
        S("CRONLOG_ALERT_THROTTLE_MS",
          "the notifier sends at most one message per job and kind of alert in this long, "
          "the rest folded into one digest (1,000 to 86,400,000)", "60000"),
        S("CRONLOG_ALERT_RETRY_BASE_MS",
          "the first window a failed delivery is retried in; each next one twice as long, up "
          "to an hour (100 to 3,600,000)", "5000"),
        S("CRONLOG_ALERT_RETRY_FOR_MS",
          "how long after its first attempt a delivery is retried before it is given up and "
          "recorded failed (0 to 31 days)", "86400000"),
        S("CRONLOG_NOTIFIER_SENDERS",
          "how many deliveries the notifier sends at once (1 to 64); a tenant has at most 4 "
          "of them, a channel 1", "8"),
    )),
    ("The history projector", (
        S("CRONLOG_PROJECTOR_NICE",
          "CPU priority the history projector lowers itself by: history may lag under load, "
          "firing and starting runs must not", "10"),
        S("CRONLOG_HISTORY_RETENTION_DAYS",
          "the projector drops day partitions older than this, hourly", "90"),
    )),
    ("Metrics and logs", (
        S("CRONLOG_API_METRICS_PORT",
          "the api's `/metrics`, `/healthz`, `/readyz` port; 0 serves none "
          "(docs/operations.md, \"Monitoring\")", "0"),
        S("CRONLOG_SCHEDULER_METRICS_PORT", "the same for a scheduler", "0"),
        S("CRONLOG_WORKER_METRICS_PORT", "the same for a worker", "0"),
        S("CRONLOG_PROJECTOR_METRICS_PORT", "the same for the history projector", "0"),
        S("CRONLOG_NOTIFIER_METRICS_PORT", "the same for the notifier", "0"),
        S("CRONLOG_METRICS_HOST", "the address those ports bind", "127.0.0.1"),
        S("CRONLOG_LOG_FORMAT",
          "`json`: one JSON object per line with role, instance and the run's "
          "tenant/job_id/run_id/attempt", "text", read_by="logging"),
        S("CRONLOG_LOG_LEVEL", "the lowest level logged (`DEBUG`, `INFO`, `WARNING`, `ERROR`)",
          "INFO", read_by="logging"),
    )),
    ("The console", (
        S("CRONLOG_CONSOLE_ADDRESS", "where the console listens", "127.0.0.1:8080"),
        S("CRONLOG_CONSOLE_REMOTE",
          "`1` allows a non-loopback console address (put TLS in front)", "0"),
        S("CRONLOG_CONSOLE_SECURE_COOKIE",
          "`1` marks the console's session cookie Secure; a console bound beyond loopback "
          "marks it Secure whatever this says", "0"),
        S("CRONLOG_CONSOLE_HOSTS",
          "the Host names the console answers (421 for any other: DNS rebinding), "
          "comma-separated names or addresses without ports; a console bound beyond loopback "
          "must list its own", "localhost,127.0.0.1,::1"),
        S("CRONLOG_CONSOLE_PAGE_SECONDS",
          "each console page's time limit (more than 0, at most 60): its run-history reads "
          "and the api's reads get what is left of it; charts past it are left out", "5"),
        S("CRONLOG_CONSOLE_HISTORY_CONNECTIONS", "the console's ClickHouse connections", "4"),
        S("CRONLOG_CONSOLE_TENANT_SHARE",
          "the share of those connections, and of the console's 32 pages in progress, one "
          "tenant may hold at once (a fraction greater than 0 and at most 1)", "0.5"),
        S("CRONLOG_CONSOLE_TENANT_SESSIONS",
          "signed-in sessions per tenant (its oldest ends first); 10,000 in all, where the "
          "tenant holding the most gives way", "100"),
    )),
    ("The `cronlog` command", (
        S("CRONLOG_ENV_FILE",
          "a file of `CRONLOG_NAME=value` lines (`make run` writes "
          "`.cronlog/run/cronlog.env`) whose values fill in the variables the environment "
          "does not set; the `cronlog` command reads it (or `--env-file PATH`) before "
          "anything else (docs/cli.md)", read_by="command"),
        S("CRONLOG_TOKEN",
          "the bearer token the client commands send (an environment variable, not an "
          "option, so it stays out of `ps` and shell history)", read_by="command"),
        S("CRONLOG_TOKEN_FILE",
          "a file holding that token instead (a mounted secret; docs/security.md)",
          read_by="command"),
    )),
)
del S

SETTINGS: tuple[SettingDoc, ...] = tuple(s for _, group in SECTIONS for s in group)
