"""CRONLOG_LOG_FORMAT=json: one JSON object per log line, for a log collector to index.

Each object has the line's timestamp (UTC, ISO 8601), level, logger and message, the process's
role and instance, and the run it is about when the line passed `extra={"tenant": ...,
"job_id": ..., "run_id": ..., "attempt": ...}`. Nothing else of the log record is written:
a record carries whatever a caller attached to it, and only these named fields can reach the
log, so a secret in some other attribute never does."""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from datetime import UTC, datetime

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The fields a line may carry about the run it concerns, passed with `extra=`.
CONTEXT_FIELDS = ("tenant", "job_id", "run_id", "attempt")


class LogFormatError(ValueError):
    """CRONLOG_LOG_FORMAT names no format cronlog writes."""


class JsonLogFormatter(logging.Formatter):
    def __init__(self, role: str, instance: str) -> None:
        super().__init__()
        self._role = role
        self._instance = instance

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "role": self._role,
            "instance": self._instance,
        }
        for name in CONTEXT_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value if isinstance(value, int | str) else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def log_format(env: Mapping[str, str]) -> str:
    value = env.get("CRONLOG_LOG_FORMAT", "").strip().lower() or "text"
    if value not in FORMATS:
        raise LogFormatError(f"CRONLOG_LOG_FORMAT: expected text or json, got {value!r}")
    return value


def instance_name(env: Mapping[str, str]) -> str:
    """The process's name in its log lines: the configured scheduler or worker id, else
    host and process id."""
    return (env.get("CRONLOG_INSTANCE_ID") or env.get("CRONLOG_WORKER_ID")
            or f"{socket.gethostname()}-{os.getpid()}")


def configure_logging(role: str, env: Mapping[str, str] | None = None) -> None:
    env = os.environ if env is None else env
    level = env.get("CRONLOG_LOG_LEVEL", "INFO")
    if log_format(env) == "text":
        logging.basicConfig(level=level, format=TEXT_FORMAT)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter(role, instance_name(env)))
    logging.basicConfig(level=level, handlers=[handler])
