"""cronlog's roles as child processes of a development tool, configured through the same
CRONLOG_* variables an operator would set."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from cronlog.infra.config import Settings

ROLES = ("api", "scheduler", "worker", "projector", "notifier")


def settings_env(settings: Settings) -> dict[str, str]:
    return {
        "CRONLOG_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
        "CRONLOG_POSTGRES_DSN": settings.postgres_dsn,
        "CRONLOG_CLICKHOUSE_HOST": settings.clickhouse_host,
        "CRONLOG_CLICKHOUSE_PORT": str(settings.clickhouse_port),
        "CRONLOG_CLICKHOUSE_DATABASE": settings.clickhouse_database,
        "CRONLOG_CLICKHOUSE_USER": settings.clickhouse_user,
        "CRONLOG_CLICKHOUSE_PASSWORD": settings.clickhouse_password,
        "CRONLOG_CLICKHOUSE_SECURE": "1" if settings.clickhouse_secure else "0",
        "CRONLOG_CLICKHOUSE_VERIFY": "1" if settings.clickhouse_verify else "0",
        "CRONLOG_CLICKHOUSE_CA_FILE": settings.clickhouse_ca_file,
        "CRONLOG_CLICKHOUSE_USERS_DIR": settings.clickhouse_users_dir,
        "CRONLOG_ANALYST_NETWORKS": ",".join(settings.analyst_networks),
        "CRONLOG_KAFKA_CONFIG": "\n".join(f"{k}={v}" for k, v in settings.kafka_config),
        # Already in the line above: a file inherited from this process would set them twice.
        "CRONLOG_KAFKA_CONFIG_FILE": "",
        "CRONLOG_HTTP_ALLOW": ",".join(settings.http_allow),
        "CRONLOG_COMMAND_ALLOW": ",".join(settings.command_allow),
        "CRONLOG_COMMAND_USER": settings.command_user,
        "CRONLOG_COMMAND_GRACE_SECONDS": repr(settings.command_grace_seconds),
        # The SMTP settings other than the host apply only with one (config_alerts.py).
        "CRONLOG_SMTP_HOST": settings.smtp_host,
        "CRONLOG_SMTP_PORT": str(settings.smtp_port) if settings.smtp_host else "",
        "CRONLOG_SMTP_FROM": settings.smtp_from,
        "CRONLOG_SMTP_STARTTLS": "1" if settings.smtp_starttls else "0",
        "CRONLOG_SMTP_USERNAME": settings.smtp_username,
        # The file, not the password: it stays out of the roles' environments.
        "CRONLOG_SMTP_PASSWORD_FILE": settings.smtp_password_file,
        # The file, not the key (issue 37).
        "CRONLOG_ALERT_SIGNING_KEY_FILE": settings.alert_signing_key_file,
        "CRONLOG_ALERT_HTTP_TIMEOUT_MS": str(
            int(settings.alert_http_timeout.total_seconds() * 1000)),
        "CRONLOG_ALERT_THROTTLE_MS": str(int(settings.alert_throttle.total_seconds() * 1000)),
        "CRONLOG_ALERT_RETRY_BASE_MS": str(
            int(settings.alert_retry_base.total_seconds() * 1000)),
        "CRONLOG_ALERT_RETRY_FOR_MS": str(int(settings.alert_retry_for.total_seconds() * 1000)),
        "CRONLOG_NOTIFIER_SENDERS": str(settings.notifier_senders),
        "CRONLOG_TOPIC_PREFIX": settings.topic_prefix,
        "CRONLOG_PARTITIONS": str(settings.partitions),
        "CRONLOG_KAFKA_PARTITIONS": str(settings.kafka_partitions or ""),
        "CRONLOG_TOPIC_REPLICATION_FACTOR": str(settings.topic_replication_factor),
        "CRONLOG_TOPIC_MIN_INSYNC_REPLICAS": str(settings.topic_min_insync_replicas),
        # 0 is each topic's default retention, which the variable spells as unset.
        "CRONLOG_JOB_EVENTS_RETENTION_DAYS": str(settings.job_events_retention_days or ""),
        "CRONLOG_RUN_EVENTS_RETENTION_DAYS": str(settings.run_events_retention_days or ""),
        "CRONLOG_DISPATCH_RETENTION_DAYS": str(settings.dispatch_retention_days or ""),
        "CRONLOG_INBOX_RETENTION_DAYS": str(settings.inbox_retention_days),
        "CRONLOG_HISTORY_RETENTION_DAYS": str(settings.history_retention.days),
        "CRONLOG_GRPC_ADDRESS": settings.grpc_address,
        "CRONLOG_QUEUES": ",".join(settings.queues),
        "CRONLOG_WORKER_QUEUES": ",".join(settings.worker_queues),
        "CRONLOG_TENANT_QUEUES": allow_list_env(settings.tenant_queues),
        "CRONLOG_TENANT_HANDLERS": allow_list_env(settings.tenant_handlers),
        "CRONLOG_API_OPEN": "1" if settings.api_open else "0",
        # `-` is none shared: the variable unset would mean the default.
        "CRONLOG_SHARED_QUEUES": ",".join(settings.shared_queues) or "-",
        "CRONLOG_SHARED_HANDLERS": ",".join(settings.shared_handlers) or "-",
        "CRONLOG_API_THREADS": str(settings.api_threads),
        "CRONLOG_API_MAX_CONCURRENT_RPCS": str(settings.api_max_concurrent_rpcs),
        "CRONLOG_API_TENANT_SHARE": repr(settings.api_tenant_share),
        "CRONLOG_TENANT_COMMAND_RATE": repr(settings.tenant_command_rate),
        "CRONLOG_TENANT_COMMAND_BURST": str(settings.tenant_command_burst),
        "CRONLOG_TENANT_READ_RATE": repr(settings.tenant_read_rate),
        "CRONLOG_TENANT_READ_BURST": str(settings.tenant_read_burst),
        "CRONLOG_WORKER_SLOTS": str(settings.worker_slots),
        "CRONLOG_WORKER_TENANT_SHARE": repr(settings.worker_tenant_share),
        "CRONLOG_LOOKAHEAD_MS": str(int(settings.lookahead.total_seconds() * 1000)),
        "CRONLOG_HANDOVER_REACH_MS": str(int(settings.handover_reach.total_seconds() * 1000)),
        "CRONLOG_OWNER_SESSION_TIMEOUT_MS": str(
            int(settings.owner_session_timeout.total_seconds() * 1000)),
        # At most the lookahead means off, and the variable must be positive.
        "CRONLOG_SPARSE_LOOKAHEAD_MS": str(int(
            max(settings.sparse_lookahead, settings.lookahead).total_seconds() * 1000)),
        "CRONLOG_OWNER_BATCH": str(settings.owner_batch),
        "CRONLOG_OWNER_CYCLE_BUDGET_MS": str(
            int(settings.owner_cycle_budget.total_seconds() * 1000)),
        "CRONLOG_CATCH_UP_WINDOW_MS": str(int(settings.catch_up_window.total_seconds() * 1000)),
        "CRONLOG_START_TIMEOUT_MS": str(int(settings.start_timeout.total_seconds() * 1000)),
        "CRONLOG_HEARTBEAT_INTERVAL_MS": str(
            int(settings.heartbeat_interval.total_seconds() * 1000)),
        "CRONLOG_CANCEL_GRACE_MS": str(int(settings.cancel_grace.total_seconds() * 1000)),
        "CRONLOG_PROJECTOR_NICE": str(settings.projector_nice),
        "CRONLOG_WORKER_NICE": str(settings.worker_nice),
        "CRONLOG_HANDLER_MODULES": ",".join(settings.handler_modules),
        "CRONLOG_WORKER_HANDLERS": ",".join(settings.worker_handlers),
        "CRONLOG_CONSOLE_REMOTE": "1" if settings.console_remote else "0",
        "CRONLOG_CONSOLE_SECURE_COOKIE": "1" if settings.console_secure_cookie else "0",
        "CRONLOG_CONSOLE_HOSTS": ",".join(settings.console_hosts),
        "CRONLOG_CONSOLE_PAGE_SECONDS": repr(settings.console_page_seconds),
        "CRONLOG_CONSOLE_HISTORY_CONNECTIONS": str(settings.console_history_connections),
        "CRONLOG_CONSOLE_TENANT_SHARE": repr(settings.console_tenant_share),
        "CRONLOG_CONSOLE_TENANT_SESSIONS": str(settings.console_tenant_sessions),
        **tenant_limits_env(settings),
    }


def allow_list_env(allowed: Mapping[str, tuple[str, ...]]) -> str:
    """The `tenant:name|name,...` form config_tenants.parse_tenant_allow_list reads."""
    return ",".join(f"{tenant}:{'|'.join(names)}" for tenant, names in allowed.items())


def tenant_limits_env(settings: Settings) -> dict[str, str]:
    limits = settings.tenant_limits
    return {
        "CRONLOG_TENANT_MAX_JOBS": str(limits.default.max_jobs),
        "CRONLOG_TENANT_MAX_IN_FLIGHT": str(limits.default.max_in_flight),
        "CRONLOG_TENANT_LIMITS": ",".join(f"{tenant}:{limit.max_jobs}:{limit.max_in_flight}"
                                          for tenant, limit in limits.overrides.items()),
    }


def spawn_role(role: str, settings: Settings, log_dir: Path,
               extra_env: dict[str, str] | None = None,
               python: Path | None = None) -> subprocess.Popen[bytes]:
    """A role configured by settings over this process's environment (tests' services);
    `python`: another interpreter, e.g. a virtualenv's with the user's handlers installed."""
    return spawn(role, {**os.environ, **settings_env(settings), **(extra_env or {})}, log_dir,
                 python)


def role_environment(inherited: Mapping[str, str], settings: Mapping[str, str],
                     role_env: Mapping[str, str]) -> dict[str, str]:
    """A role's environment as `make run` gives it: the inherited one without any
    CRONLOG_* variable, then exactly the settings the launcher decided (the user's among
    them), then the role's own. Nothing inherited can undo a decision, such as an env
    file (CRONLOG_ENV_FILE) a shell exported for operator commands."""
    base = {name: value for name, value in inherited.items()
            if not name.startswith("CRONLOG_")}
    return {**base, **settings, **role_env}


def spawn(role: str, env: Mapping[str, str], log_dir: Path,
          python: Path | None = None) -> subprocess.Popen[bytes]:
    """`cronlog <role>` with exactly env, its output appended to log_dir/<role>.log."""
    log_dir.mkdir(parents=True, exist_ok=True)
    with (log_dir / f"{role}.log").open("ab") as out:
        return subprocess.Popen([str(python or sys.executable), "-m",
                                 "cronlog.infra.entrypoints.cli", role],
                                stdout=out, stderr=subprocess.STDOUT, env=dict(env))


def stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
