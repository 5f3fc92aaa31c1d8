"""Settings from the CRONLOG_* environment variables: each value checked, and a clear error
naming the variable for one that is not right."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta

from cronlog.domain.limits import TenantLimit, TenantLimits
from cronlog.domain.spec import HANDLER_PATTERN, QUEUE_PATTERN, TENANT_PATTERN
from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_analysts import analyst_networks_from_env, analysts_from_env
from cronlog.infra.config_commands import command_settings_from_env
from cronlog.infra.config_connections import (
    clickhouse_tls_from_env,
    kafka_config_from_env,
    read_named_file,
)

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


def _fraction(env: Mapping[str, str], name: str, default: float) -> float:
    """A fraction greater than 0 and at most 1."""
    raw = env.get(_ENV + name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{_ENV}{name}: expected a fraction such as 0.5, got {raw!r}") from None
    if not 0.0 < value <= 1.0:  # also refuses nan
        raise ConfigError(f"{_ENV}{name}: must be greater than 0 and at most 1, got {raw}")
    return value


def _rate(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive rate per second, such as 500 or 0.5."""
    raw = env.get(_ENV + name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{_ENV}{name}: expected a rate per second such as 50 or 0.5, "
                          f"got {raw!r}") from None
    if not 0.0 < value < float("inf"):  # also refuses nan
        raise ConfigError(f"{_ENV}{name}: must be a positive number, got {raw}")
    return value


def _port(env: Mapping[str, str], name: str) -> int:
    """A TCP port, 0 for none."""
    raw = env.get(_ENV + name, "").strip()
    if raw == "":
        return 0
    if not raw.isdigit() or int(raw) > 65535:
        raise ConfigError(f"{_ENV}{name}: expected a port from 0 (off) to 65535, got {raw!r}")
    return int(raw)


def _millis(env: Mapping[str, str], name: str, default: timedelta) -> timedelta:
    raw = env.get(_ENV + name)
    if raw is None or raw == "":
        return default
    return timedelta(milliseconds=_int(env, name, 1))


# What Kafka's brokers accept by default (group.min/max.session.timeout.ms): a value outside
# would be refused only when the scheduler joins its group.
OWNER_SESSION_RANGE_MS = (6_000, 300_000)


def _owner_session_timeout(env: Mapping[str, str], default: timedelta) -> timedelta:
    value = _millis(env, "OWNER_SESSION_TIMEOUT_MS", default)
    lowest, highest = OWNER_SESSION_RANGE_MS
    if not lowest <= value / timedelta(milliseconds=1) <= highest:
        raise ConfigError(f"{_ENV}OWNER_SESSION_TIMEOUT_MS: must be {lowest} to {highest} ms, "
                          f"got {int(value / timedelta(milliseconds=1))}")
    return value


# The most a cycle may decide: the owner's longest time between polls is this, a transaction
# stuck to its deadline (25 s) and a rewind (10 s), within max.poll.interval (45 s);
# infra/kafka/owner_transport.py.
OWNER_CYCLE_BUDGET_RANGE_MS = (10, 5_000)


def _owner_cycle_budget(env: Mapping[str, str], default: timedelta) -> timedelta:
    value = _millis(env, "OWNER_CYCLE_BUDGET_MS", default)
    lowest, highest = OWNER_CYCLE_BUDGET_RANGE_MS
    millis = value / timedelta(milliseconds=1)
    if not lowest <= millis <= highest:
        raise ConfigError(f"{_ENV}OWNER_CYCLE_BUDGET_MS: must be {lowest} to {highest} ms, "
                          f"got {int(millis)}")
    return value


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
    named = read_named_file(env, _ENV + "TENANT_TOKENS_FILE")
    if named is not None:
        pairs += parse_tenant_tokens_file(*named)
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


NONE_SHARED = "-"


def _shared(env: Mapping[str, str], name: str, pattern: re.Pattern[str],
            default: tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated names every tenant without an allow-list may use when tokens are on;
    unset: the default; `-`: none."""
    raw = env.get(_ENV + name, "").strip()
    if raw == "":
        return default
    if raw == NONE_SHARED:
        return ()
    return parse_names(raw, _ENV + name, pattern)


def _shared_queues(env: Mapping[str, str], declared: tuple[str, ...]) -> tuple[str, ...]:
    if not env.get(_ENV + "SHARED_QUEUES", "").strip():
        # The default queue, when the operator declared one by that name.
        return tuple(q for q in Settings.shared_queues if q in declared)
    shared = _shared(env, "SHARED_QUEUES", QUEUE_PATTERN, ())
    undeclared = [q for q in shared if q not in declared]
    if undeclared:
        raise ConfigError(f"{_ENV}SHARED_QUEUES: {', '.join(undeclared)} not declared in "
                          f"{_ENV}QUEUES ({', '.join(declared)})")
    return shared


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


def _console_hosts(env: Mapping[str, str], default: tuple[str, ...]) -> tuple[str, ...]:
    from cronlog.infra.console.hosts import parse_hosts

    raw = env.get(_ENV + "CONSOLE_HOSTS", "").strip()
    if raw == "":
        return default
    try:
        return parse_hosts(raw)
    except ValueError as exc:
        raise ConfigError(f"{_ENV}CONSOLE_HOSTS: {exc}") from None


def _page_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """Seconds, more than 0 and at most 60 (a page is not a report)."""
    raw = env.get(_ENV + name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{_ENV}{name}: expected seconds such as 5 or 2.5, got {raw!r}") from None
    if not 0.0 < value <= 60.0:  # also refuses nan
        raise ConfigError(f"{_ENV}{name}: must be more than 0 and at most 60, got {raw}")
    return value


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
        analysts=analysts_from_env(env),
        clickhouse_users_dir=env.get(_ENV + "CLICKHOUSE_USERS_DIR", d.clickhouse_users_dir),
        analyst_networks=analyst_networks_from_env(env, d.analyst_networks),
        kafka_config=kafka_config_from_env(env),
        **clickhouse_tls_from_env(env),
        topic_prefix=env.get(_ENV + "TOPIC_PREFIX", d.topic_prefix),
        partitions=_int(env, "PARTITIONS", d.partitions),
        kafka_partitions=(_int(env, "KAFKA_PARTITIONS", 1)
                          if env.get(_ENV + "KAFKA_PARTITIONS") else None),
        topic_replication_factor=_int(env, "TOPIC_REPLICATION_FACTOR",
                                      d.topic_replication_factor),
        topic_min_insync_replicas=_int(env, "TOPIC_MIN_INSYNC_REPLICAS",
                                       d.topic_min_insync_replicas),
        job_events_retention_days=_int(env, "JOB_EVENTS_RETENTION_DAYS",
                                       d.job_events_retention_days),
        run_events_retention_days=_int(env, "RUN_EVENTS_RETENTION_DAYS",
                                       d.run_events_retention_days),
        dispatch_retention_days=_int(env, "DISPATCH_RETENTION_DAYS", d.dispatch_retention_days),
        inbox_retention_days=_int(env, "INBOX_RETENTION_DAYS", d.inbox_retention_days),
        grpc_address=env.get(_ENV + "GRPC_ADDRESS", d.grpc_address),
        tenant_tokens=_tenant_tokens(env),
        api_open=_flag(env, "API_OPEN"),
        tls_cert=tls_cert,
        tls_key=tls_key,
        api_threads=_int(env, "API_THREADS", d.api_threads),
        api_max_concurrent_rpcs=_int(env, "API_MAX_CONCURRENT_RPCS", d.api_max_concurrent_rpcs),
        api_tenant_share=_fraction(env, "API_TENANT_SHARE", d.api_tenant_share),
        tenant_command_rate=_rate(env, "TENANT_COMMAND_RATE", d.tenant_command_rate),
        tenant_command_burst=_int(env, "TENANT_COMMAND_BURST", d.tenant_command_burst),
        tenant_read_rate=_rate(env, "TENANT_READ_RATE", d.tenant_read_rate),
        tenant_read_burst=_int(env, "TENANT_READ_BURST", d.tenant_read_burst),
        lookahead=_millis(env, "LOOKAHEAD_MS", d.lookahead),
        sparse_lookahead=_millis(env, "SPARSE_LOOKAHEAD_MS", d.sparse_lookahead),
        handover_reach=_millis(env, "HANDOVER_REACH_MS", d.handover_reach),
        owner_session_timeout=_owner_session_timeout(env, d.owner_session_timeout),
        catch_up_window=_millis(env, "CATCH_UP_WINDOW_MS", d.catch_up_window),
        start_timeout=_millis(env, "START_TIMEOUT_MS", d.start_timeout),
        owner_poll=_millis(env, "OWNER_POLL_MS", d.owner_poll),
        owner_batch=_int(env, "OWNER_BATCH", d.owner_batch),
        owner_cycle_budget=_owner_cycle_budget(env, d.owner_cycle_budget),
        reply_timeout=_millis(env, "REPLY_TIMEOUT_MS", d.reply_timeout),
        queues=queues,
        worker_queues=worker_queues,
        tenant_queues=tenant_queues,
        tenant_handlers=parse_tenant_allow_list(env.get(_ENV + "TENANT_HANDLERS", ""),
                                                _ENV + "TENANT_HANDLERS", HANDLER_PATTERN),
        shared_queues=_shared_queues(env, queues),
        shared_handlers=_shared(env, "SHARED_HANDLERS", HANDLER_PATTERN, d.shared_handlers),
        worker_slots=_int(env, "WORKER_SLOTS", d.worker_slots),
        worker_tenant_share=_fraction(env, "WORKER_TENANT_SHARE", d.worker_tenant_share),
        heartbeat_interval=_millis(env, "HEARTBEAT_INTERVAL_MS", d.heartbeat_interval),
        cancel_grace=_millis(env, "CANCEL_GRACE_MS", d.cancel_grace),
        history_retention=timedelta(days=_int(env, "HISTORY_RETENTION_DAYS", 90)),
        projector_nice=_nice(env, "PROJECTOR_NICE", d.projector_nice, 0),
        worker_nice=_nice(env, "WORKER_NICE", d.worker_nice, -20),
        tenant_limits=_tenant_limits(env),
        handler_modules=tuple(m for m in env.get(_ENV + "HANDLER_MODULES", "").split(",") if m),
        http_allow=_http_allow(env),
        **command_settings_from_env(env),
        worker_id=env.get(_ENV + "WORKER_ID", d.worker_id),
        metrics_host=env.get(_ENV + "METRICS_HOST", "") or d.metrics_host,
        api_metrics_port=_port(env, "API_METRICS_PORT"),
        scheduler_metrics_port=_port(env, "SCHEDULER_METRICS_PORT"),
        worker_metrics_port=_port(env, "WORKER_METRICS_PORT"),
        projector_metrics_port=_port(env, "PROJECTOR_METRICS_PORT"),
        console_address=env.get(_ENV + "CONSOLE_ADDRESS", "") or d.console_address,
        console_remote=_flag(env, "CONSOLE_REMOTE"),
        console_secure_cookie=_flag(env, "CONSOLE_SECURE_COOKIE"),
        console_hosts=_console_hosts(env, d.console_hosts),
        console_page_seconds=_page_seconds(env, "CONSOLE_PAGE_SECONDS", d.console_page_seconds),
        console_history_connections=_int(env, "CONSOLE_HISTORY_CONNECTIONS",
                                         d.console_history_connections),
        console_tenant_share=_fraction(env, "CONSOLE_TENANT_SHARE", d.console_tenant_share),
        console_tenant_sessions=_int(env, "CONSOLE_TENANT_SESSIONS", d.console_tenant_sessions),
        api_ca_file=env.get(_ENV + "TLS_CA", ""),
        instance_id=env.get(_ENV + "INSTANCE_ID", "") or d.instance_id,
    )
