"""Process configuration, read from the environment by the composition root only."""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

from cronlog.domain.limits import TenantLimit, TenantLimits
from cronlog.domain.spec import HANDLER_PATTERN, QUEUE_PATTERN, TENANT_PATTERN


class ConfigError(ValueError):
    """An environment variable holds a value cronlog cannot use."""


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
    topic_prefix: str = "cronlog."
    partitions: int = 8
    grpc_address: str = "127.0.0.1:50051"
    # (tenant, bearer token) pairs the api accepts; none means the api runs open, without
    # authentication. Kept out of repr so that logging Settings never prints a token.
    tenant_tokens: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Open mode (no tokens) binds only loopback addresses unless this says open is meant.
    api_open: bool = False
    # PEM files of the api's TLS certificate chain and key; both empty means plaintext.
    tls_cert: str = ""
    tls_key: str = ""
    # How far ahead of a fire time the owner pre-enqueues the run; workers hold it until due.
    lookahead: timedelta = timedelta(seconds=2)
    # Jobs whose runs are at least this far apart (one-off jobs, cron jobs that fire every
    # minute or less often) are pre-enqueued this far ahead: a top-of-hour or midnight burst
    # reaches the workers over the minute before it (docs/lifecycle.md, docs/benchmarks.md).
    sparse_lookahead: timedelta = timedelta(seconds=60)
    # A scheduler leaving on purpose (SIGTERM) first dispatches everything due this far
    # ahead, so its partitions' runs are not late while the next owner takes them.
    handover_reach: timedelta = timedelta(seconds=5)
    # Fire times later than this are misfires, handled by the job's misfire policy.
    catch_up_window: timedelta = timedelta(seconds=60)
    # A dispatched attempt no worker starts within this of its time is lost and retried.
    start_timeout: timedelta = timedelta(minutes=5)
    # How long one owner cycle may wait for inbox messages before it looks at due jobs again.
    owner_poll: timedelta = timedelta(milliseconds=100)
    # At most this many inbox messages, and this many due jobs, per owner cycle (and so per
    # Kafka transaction): larger batches spread each transaction's fixed cost wider.
    owner_batch: int = 2000
    reply_timeout: timedelta = timedelta(seconds=15)
    # The queues operators declared: `cronlog provision` creates their dispatch topics, and a
    # job may name only these (a request never creates a topic).
    queues: tuple[str, ...] = ("default",)
    # The declared queues this worker process serves; empty means every declared queue.
    worker_queues: tuple[str, ...] = ()
    # Per-tenant allow-lists. A tenant listed may use only its queues (all declared) and its
    # handlers; a tenant not listed may use every declared queue and any handler.
    tenant_queues: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tenant_handlers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    worker_slots: int = 16
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
    # Operator exceptions to the http handler's outbound fence (commands/outbound.py):
    # CIDRs, addresses, host names, each optionally with :port.
    http_allow: tuple[str, ...] = ()
    worker_id: str = ""
    instance_id: str = field(default_factory=default_instance_id)
    extra: Mapping[str, str] = field(default_factory=dict)

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
    def poison_topic(self) -> str:
        return self.topic("poison")

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


_ENV = "CRONLOG_"


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(_ENV + name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{_ENV}{name}: expected an integer, got {raw!r}") from exc
    if value <= 0:
        raise ConfigError(f"{_ENV}{name}: must be positive, got {value}")
    return value


def _nice(env: Mapping[str, str], name: str, default: int, lowest: int) -> int:
    raw = env.get(_ENV + name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{_ENV}{name}: expected an integer, got {raw!r}") from exc
    if not lowest <= value <= 19:
        raise ConfigError(f"{_ENV}{name}: must be {lowest} to 19, got {value}")
    return value


def _millis(env: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    raw = env.get(_ENV + name)
    if raw is None or raw == "":
        return default
    return timedelta(milliseconds=_int(env, name, 1))


def _token_pair(tenant: str, token: str, where: str) -> tuple[str, str]:
    # Error messages name where the pair came from but never echo the token. A tenant no
    # job could belong to stops the api at start instead of locking that tenant out later.
    if not TENANT_PATTERN.fullmatch(tenant):
        raise ConfigError(f"{where}: tenant {tenant!r} must match {TENANT_PATTERN.pattern}")
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"{where}: the token of tenant {tenant!r} must be non-empty, "
                          "without whitespace")
    return tenant, token


def parse_tenant_tokens_file(text: str, source: str) -> list[tuple[str, str]]:
    """Lines of `tenant token`; blank lines and lines starting with '#' are skipped. A '#'
    later in a line is part of the token, so tokens may contain any non-blank character."""
    pairs: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = stripped.split()
        if len(fields) != 2:
            raise ConfigError(f"{source} line {number}: expected 'tenant token', "
                              f"got {len(fields)} fields")
        pairs.append(_token_pair(fields[0], fields[1], f"{source} line {number}"))
    return pairs


def parse_tenant_tokens_list(text: str, source: str) -> list[tuple[str, str]]:
    """Comma-separated `tenant=token` entries; the token is everything after the first '='."""
    pairs: list[tuple[str, str]] = []
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        tenant, sep, token = entry.partition("=")
        if not sep:
            raise ConfigError(f"{source} entry {number}: expected 'tenant=token'")
        pairs.append(_token_pair(tenant.strip(), token.strip(), f"{source} entry {number}"))
    return pairs


def _tenant_tokens(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    path = env.get(_ENV + "TENANT_TOKENS_FILE", "")
    if path:
        source = f"{_ENV}TENANT_TOKENS_FILE {path}"
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{source}: cannot read: {exc}") from exc
        pairs += parse_tenant_tokens_file(text, source)
    pairs += parse_tenant_tokens_list(env.get(_ENV + "TENANT_TOKENS", ""), _ENV + "TENANT_TOKENS")
    owners: dict[str, str] = {}
    for tenant, token in pairs:
        # One token naming two tenants would make the caller's tenant depend on list order.
        if owners.setdefault(token, tenant) != tenant:
            raise ConfigError(f"tenants {owners[token]!r} and {tenant!r} have the same token")
    return tuple(dict.fromkeys(pairs))


def _tls(env: Mapping[str, str]) -> tuple[str, str]:
    cert = env.get(_ENV + "TLS_CERT", "")
    key = env.get(_ENV + "TLS_KEY", "")
    if bool(cert) != bool(key):
        raise ConfigError(f"{_ENV}TLS_CERT and {_ENV}TLS_KEY must be set together")
    return cert, key


def parse_names(text: str, source: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    """Comma-separated names, each matching pattern, in order, without repeats."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if not pattern.fullmatch(name):
            raise ConfigError(f"{source}: {name!r} must match {pattern.pattern}")
    return tuple(dict.fromkeys(names))


def parse_tenant_allow_list(text: str, source: str,
                            pattern: re.Pattern[str]) -> dict[str, tuple[str, ...]]:
    """Comma-separated `tenant:name|name...` entries (`acme:default|batch,beta:default`)."""
    allowed: dict[str, tuple[str, ...]] = {}
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        tenant, sep, names = entry.partition(":")
        tenant = tenant.strip()
        where = f"{source} entry {number}"
        if not sep or not TENANT_PATTERN.fullmatch(tenant):
            raise ConfigError(f"{where}: expected 'tenant:name|name...', got {entry!r}")
        if tenant in allowed:
            raise ConfigError(f"{where}: tenant {tenant!r} is listed twice")
        listed = [n.strip() for n in names.split("|") if n.strip()]
        if not listed:
            raise ConfigError(f"{where}: tenant {tenant!r} lists nothing")
        for name in listed:
            if not pattern.fullmatch(name):
                raise ConfigError(f"{where}: {name!r} must match {pattern.pattern}")
        allowed[tenant] = tuple(dict.fromkeys(listed))
    return allowed


def _queues(env: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...],
                                              dict[str, tuple[str, ...]]]:
    """Declared queues, the ones this worker serves, and the tenants' queue allow-lists."""
    declared = parse_names(env.get(_ENV + "QUEUES", ""), _ENV + "QUEUES", QUEUE_PATTERN) \
        or Settings.queues
    served = parse_names(env.get(_ENV + "WORKER_QUEUES", ""), _ENV + "WORKER_QUEUES",
                         QUEUE_PATTERN)
    undeclared = [q for q in served if q not in declared]
    if undeclared:
        raise ConfigError(f"{_ENV}WORKER_QUEUES: {', '.join(undeclared)} not declared in "
                          f"{_ENV}QUEUES ({', '.join(declared)})")
    per_tenant = parse_tenant_allow_list(env.get(_ENV + "TENANT_QUEUES", ""),
                                         _ENV + "TENANT_QUEUES", QUEUE_PATTERN)
    for tenant, queues in per_tenant.items():
        undeclared = [q for q in queues if q not in declared]
        if undeclared:
            raise ConfigError(f"{_ENV}TENANT_QUEUES: tenant {tenant!r} lists "
                              f"{', '.join(undeclared)}, not declared in {_ENV}QUEUES")
    return declared, served, per_tenant


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(_ENV + name, "").strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ConfigError(f"{_ENV}{name}: expected 1 or 0, got {raw!r}")


def parse_tenant_limits(text: str, source: str) -> dict[str, TenantLimit]:
    """Comma-separated `tenant:max_jobs:max_in_flight` entries."""
    limits: dict[str, TenantLimit] = {}
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        fields = entry.split(":")
        if len(fields) != 3 or not TENANT_PATTERN.fullmatch(fields[0]):
            raise ConfigError(f"{source} entry {number}: expected 'tenant:max_jobs:max_in_flight'"
                              f", got {entry!r}")
        try:
            jobs, in_flight = int(fields[1]), int(fields[2])
        except ValueError:
            raise ConfigError(f"{source} entry {number}: limits must be integers, "
                              f"got {entry!r}") from None
        if jobs <= 0 or in_flight <= 0:
            raise ConfigError(f"{source} entry {number}: limits must be positive, got {entry!r}")
        limits[fields[0]] = TenantLimit(jobs, in_flight)
    return limits


def _tenant_limits(env: Mapping[str, str]) -> TenantLimits:
    d = TenantLimit()
    default = TenantLimit(_int(env, "TENANT_MAX_JOBS", d.max_jobs),
                          _int(env, "TENANT_MAX_IN_FLIGHT", d.max_in_flight))
    return TenantLimits(default, parse_tenant_limits(env.get(_ENV + "TENANT_LIMITS", ""),
                                                     _ENV + "TENANT_LIMITS"))


def _http_allow(env: Mapping[str, str]) -> tuple[str, ...]:
    from cronlog.worker.outbound import AllowList

    entries = tuple(e.strip() for e in env.get(_ENV + "HTTP_ALLOW", "").split(",") if e.strip())
    try:
        AllowList.parse(",".join(entries))
    except ValueError as exc:
        raise ConfigError(f"{_ENV}HTTP_ALLOW: {exc}") from exc
    return entries


def settings_from_env(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    d = Settings()
    queues, worker_queues, tenant_queues = _queues(env)
    tls_cert, tls_key = _tls(env)
    return Settings(
        kafka_bootstrap=env.get(_ENV + "KAFKA_BOOTSTRAP", d.kafka_bootstrap),
        postgres_dsn=env.get(_ENV + "POSTGRES_DSN", d.postgres_dsn),
        clickhouse_host=env.get(_ENV + "CLICKHOUSE_HOST", d.clickhouse_host),
        clickhouse_port=_int(env, "CLICKHOUSE_PORT", d.clickhouse_port),
        clickhouse_database=env.get(_ENV + "CLICKHOUSE_DATABASE", d.clickhouse_database),
        clickhouse_user=env.get(_ENV + "CLICKHOUSE_USER", d.clickhouse_user) or d.clickhouse_user,
        clickhouse_password=env.get(_ENV + "CLICKHOUSE_PASSWORD", d.clickhouse_password),
        topic_prefix=env.get(_ENV + "TOPIC_PREFIX", d.topic_prefix),
        partitions=_int(env, "PARTITIONS", d.partitions),
        grpc_address=env.get(_ENV + "GRPC_ADDRESS", d.grpc_address),
        tenant_tokens=_tenant_tokens(env),
        api_open=_flag(env, "API_OPEN"),
        tls_cert=tls_cert,
        tls_key=tls_key,
        lookahead=_millis(env, "LOOKAHEAD_MS", d.lookahead),
        sparse_lookahead=_millis(env, "SPARSE_LOOKAHEAD_MS", d.sparse_lookahead),
        handover_reach=_millis(env, "HANDOVER_REACH_MS", d.handover_reach),
        catch_up_window=_millis(env, "CATCH_UP_WINDOW_MS", d.catch_up_window),
        start_timeout=_millis(env, "START_TIMEOUT_MS", d.start_timeout),
        owner_poll=_millis(env, "OWNER_POLL_MS", d.owner_poll),
        owner_batch=_int(env, "OWNER_BATCH", d.owner_batch),
        reply_timeout=_millis(env, "REPLY_TIMEOUT_MS", d.reply_timeout),
        queues=queues,
        worker_queues=worker_queues,
        tenant_queues=tenant_queues,
        tenant_handlers=parse_tenant_allow_list(env.get(_ENV + "TENANT_HANDLERS", ""),
                                                _ENV + "TENANT_HANDLERS", HANDLER_PATTERN),
        worker_slots=_int(env, "WORKER_SLOTS", d.worker_slots),
        heartbeat_interval=_millis(env, "HEARTBEAT_INTERVAL_MS", d.heartbeat_interval),
        cancel_grace=_millis(env, "CANCEL_GRACE_MS", d.cancel_grace),
        history_retention=timedelta(days=_int(env, "HISTORY_RETENTION_DAYS", 90)),
        projector_nice=_nice(env, "PROJECTOR_NICE", d.projector_nice, 0),
        worker_nice=_nice(env, "WORKER_NICE", d.worker_nice, -20),
        tenant_limits=_tenant_limits(env),
        handler_modules=tuple(m for m in env.get(_ENV + "HANDLER_MODULES", "").split(",") if m),
        http_allow=_http_allow(env),
        worker_id=env.get(_ENV + "WORKER_ID", d.worker_id),
        instance_id=env.get(_ENV + "INSTANCE_ID", "") or d.instance_id,
    )
