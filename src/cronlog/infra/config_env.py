"""Settings from the CRONLOG_* environment variables: each value checked, and a clear error
naming the variable for one that is not right. One value's checks are in
infra/config_values.py; what each tenant may use in infra/config_tenants.py; connections
and analysts in infra/config_connections.py and infra/config_analysts.py; alert deliveries
in infra/config_alerts.py."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta

from cronlog.domain.spec import HANDLER_PATTERN
from cronlog.infra.config import ConfigError, Settings
from cronlog.infra.config_alerts import alert_settings_from_env
from cronlog.infra.config_analysts import analyst_networks_from_env, analysts_from_env
from cronlog.infra.config_commands import command_settings_from_env
from cronlog.infra.config_connections import clickhouse_tls_from_env, kafka_config_from_env
from cronlog.infra.config_handlers import worker_handlers_from
from cronlog.infra.config_tenants import (
    parse_tenant_allow_list,
    queues_from_env,
    shared_from_env,
    shared_queues_from_env,
    tenant_limits_from_env,
    tenant_tokens_from_env,
)
from cronlog.infra.config_values import (
    ENV,
    flag,
    fraction,
    millis,
    millis_within,
    nice,
    page_seconds,
    port,
    positive,
    rate,
)

# What Kafka's brokers accept by default (group.min/max.session.timeout.ms): a value outside
# would be refused only when the scheduler joins its group.
OWNER_SESSION_RANGE_MS = (6_000, 300_000)


# The most a cycle may decide: the owner's longest time between polls is this, a transaction
# stuck to its deadline (25 s) and a rewind (10 s), within max.poll.interval (45 s);
# infra/kafka/owner_transport.py and owner_transaction.py.
OWNER_CYCLE_BUDGET_RANGE_MS = (10, 5_000)


def _tls(env: Mapping[str, str]) -> tuple[str, str]:
    cert = env.get(ENV + "TLS_CERT", "")
    key = env.get(ENV + "TLS_KEY", "")
    if bool(cert) != bool(key):
        raise ConfigError(f"{ENV}TLS_CERT and {ENV}TLS_KEY must be set together")
    return cert, key


def _http_allow(env: Mapping[str, str]) -> tuple[str, ...]:
    from cronlog.outbound.policy import AllowList

    entries = tuple(e.strip() for e in env.get(ENV + "HTTP_ALLOW", "").split(",") if e.strip())
    try:
        AllowList.parse(",".join(entries))
    except ValueError as exc:
        raise ConfigError(f"{ENV}HTTP_ALLOW: {exc}") from exc
    return entries


def _console_hosts(env: Mapping[str, str], default: tuple[str, ...]) -> tuple[str, ...]:
    from cronlog.infra.console.hosts import parse_hosts

    raw = env.get(ENV + "CONSOLE_HOSTS", "").strip()
    if raw == "":
        return default
    try:
        return parse_hosts(raw)
    except ValueError as exc:
        raise ConfigError(f"{ENV}CONSOLE_HOSTS: {exc}") from None


def settings_from_env(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    d = Settings()
    queues, worker_queues, tenant_queues = queues_from_env(env)
    tls_cert, tls_key = _tls(env)
    return Settings(
        kafka_bootstrap=env.get(ENV + "KAFKA_BOOTSTRAP", d.kafka_bootstrap),
        postgres_dsn=env.get(ENV + "POSTGRES_DSN", d.postgres_dsn),
        clickhouse_host=env.get(ENV + "CLICKHOUSE_HOST", d.clickhouse_host),
        clickhouse_port=positive(env, "CLICKHOUSE_PORT", d.clickhouse_port),
        clickhouse_database=env.get(ENV + "CLICKHOUSE_DATABASE", d.clickhouse_database),
        clickhouse_user=env.get(ENV + "CLICKHOUSE_USER", d.clickhouse_user) or d.clickhouse_user,
        clickhouse_password=env.get(ENV + "CLICKHOUSE_PASSWORD", d.clickhouse_password),
        analysts=analysts_from_env(env),
        clickhouse_users_dir=env.get(ENV + "CLICKHOUSE_USERS_DIR", d.clickhouse_users_dir),
        analyst_networks=analyst_networks_from_env(env, d.analyst_networks),
        kafka_config=kafka_config_from_env(env),
        **clickhouse_tls_from_env(env),
        topic_prefix=env.get(ENV + "TOPIC_PREFIX", d.topic_prefix),
        partitions=positive(env, "PARTITIONS", d.partitions),
        kafka_partitions=(positive(env, "KAFKA_PARTITIONS", 1)
                          if env.get(ENV + "KAFKA_PARTITIONS") else None),
        topic_replication_factor=positive(env, "TOPIC_REPLICATION_FACTOR",
                                      d.topic_replication_factor),
        topic_min_insync_replicas=positive(env, "TOPIC_MIN_INSYNC_REPLICAS",
                                       d.topic_min_insync_replicas),
        job_events_retention_days=positive(env, "JOB_EVENTS_RETENTION_DAYS",
                                       d.job_events_retention_days),
        run_events_retention_days=positive(env, "RUN_EVENTS_RETENTION_DAYS",
                                       d.run_events_retention_days),
        dispatch_retention_days=positive(env, "DISPATCH_RETENTION_DAYS", d.dispatch_retention_days),
        inbox_retention_days=positive(env, "INBOX_RETENTION_DAYS", d.inbox_retention_days),
        grpc_address=env.get(ENV + "GRPC_ADDRESS", d.grpc_address),
        tenant_tokens=tenant_tokens_from_env(env),
        api_open=flag(env, "API_OPEN"),
        tls_cert=tls_cert,
        tls_key=tls_key,
        api_threads=positive(env, "API_THREADS", d.api_threads),
        api_max_concurrent_rpcs=positive(env, "API_MAX_CONCURRENT_RPCS", d.api_max_concurrent_rpcs),
        api_tenant_share=fraction(env, "API_TENANT_SHARE", d.api_tenant_share),
        tenant_command_rate=rate(env, "TENANT_COMMAND_RATE", d.tenant_command_rate),
        tenant_command_burst=positive(env, "TENANT_COMMAND_BURST", d.tenant_command_burst),
        tenant_read_rate=rate(env, "TENANT_READ_RATE", d.tenant_read_rate),
        tenant_read_burst=positive(env, "TENANT_READ_BURST", d.tenant_read_burst),
        lookahead=millis(env, "LOOKAHEAD_MS", d.lookahead),
        sparse_lookahead=millis(env, "SPARSE_LOOKAHEAD_MS", d.sparse_lookahead),
        handover_reach=millis(env, "HANDOVER_REACH_MS", d.handover_reach),
        owner_session_timeout=millis_within(env, "OWNER_SESSION_TIMEOUT_MS",
                                            d.owner_session_timeout, OWNER_SESSION_RANGE_MS),
        catch_up_window=millis(env, "CATCH_UP_WINDOW_MS", d.catch_up_window),
        start_timeout=millis(env, "START_TIMEOUT_MS", d.start_timeout),
        owner_poll=millis(env, "OWNER_POLL_MS", d.owner_poll),
        owner_batch=positive(env, "OWNER_BATCH", d.owner_batch),
        owner_cycle_budget=millis_within(env, "OWNER_CYCLE_BUDGET_MS", d.owner_cycle_budget,
                                         OWNER_CYCLE_BUDGET_RANGE_MS),
        reply_timeout=millis(env, "REPLY_TIMEOUT_MS", d.reply_timeout),
        queues=queues,
        worker_queues=worker_queues,
        tenant_queues=tenant_queues,
        tenant_handlers=parse_tenant_allow_list(env.get(ENV + "TENANT_HANDLERS", ""),
                                                ENV + "TENANT_HANDLERS", HANDLER_PATTERN),
        shared_queues=shared_queues_from_env(env, queues),
        shared_handlers=shared_from_env(env, "SHARED_HANDLERS", HANDLER_PATTERN, d.shared_handlers),
        worker_slots=positive(env, "WORKER_SLOTS", d.worker_slots),
        worker_tenant_share=fraction(env, "WORKER_TENANT_SHARE", d.worker_tenant_share),
        heartbeat_interval=millis(env, "HEARTBEAT_INTERVAL_MS", d.heartbeat_interval),
        cancel_grace=millis(env, "CANCEL_GRACE_MS", d.cancel_grace),
        history_retention=timedelta(days=positive(env, "HISTORY_RETENTION_DAYS", 90)),
        projector_nice=nice(env, "PROJECTOR_NICE", d.projector_nice, 0),
        worker_nice=nice(env, "WORKER_NICE", d.worker_nice, -20),
        tenant_limits=tenant_limits_from_env(env),
        handler_modules=tuple(m for m in env.get(ENV + "HANDLER_MODULES", "").split(",") if m),
        worker_handlers=worker_handlers_from(env.get(ENV + "WORKER_HANDLERS", "")),
        http_allow=_http_allow(env),
        **command_settings_from_env(env),
        worker_id=env.get(ENV + "WORKER_ID", d.worker_id),
        **alert_settings_from_env(env),
        metrics_host=env.get(ENV + "METRICS_HOST", "") or d.metrics_host,
        api_metrics_port=port(env, "API_METRICS_PORT"),
        scheduler_metrics_port=port(env, "SCHEDULER_METRICS_PORT"),
        worker_metrics_port=port(env, "WORKER_METRICS_PORT"),
        projector_metrics_port=port(env, "PROJECTOR_METRICS_PORT"),
        notifier_metrics_port=port(env, "NOTIFIER_METRICS_PORT"),
        console_address=env.get(ENV + "CONSOLE_ADDRESS", "") or d.console_address,
        console_remote=flag(env, "CONSOLE_REMOTE"),
        console_secure_cookie=flag(env, "CONSOLE_SECURE_COOKIE"),
        console_hosts=_console_hosts(env, d.console_hosts),
        console_page_seconds=page_seconds(env, "CONSOLE_PAGE_SECONDS", d.console_page_seconds),
        console_history_connections=positive(env, "CONSOLE_HISTORY_CONNECTIONS",
                                         d.console_history_connections),
        console_tenant_share=fraction(env, "CONSOLE_TENANT_SHARE", d.console_tenant_share),
        console_tenant_sessions=positive(env, "CONSOLE_TENANT_SESSIONS", d.console_tenant_sessions),
        api_ca_file=env.get(ENV + "TLS_CA", ""),
        instance_id=env.get(ENV + "INSTANCE_ID", "") or d.instance_id,
    )
