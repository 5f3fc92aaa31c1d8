"""The fields a log line carries about the tenant, job, run and attempt it concerns, passed
with `extra=` (CRONLOG_LOG_FORMAT=json writes them: infra/observability/json_logs.py; the
text format leaves them out, its message already names them).

Pure: the scheduler and the worker build them from what they hold. Values that came from a
message are written as text of bounded length, whatever a writer put there."""

from __future__ import annotations

from collections.abc import Mapping

# Longer than any id or tenant name cronlog accepts: a field from a message set aside for
# being malformed still cannot make one line unbounded.
MAX_FIELD_CHARS = 100
FIELDS = ("tenant", "job_id", "run_id", "attempt")


def _text(value: object) -> str:
    return str(value)[:MAX_FIELD_CHARS]


def log_fields(tenant: object = None, job_id: object = None, run_id: object = None,
               attempt: object = None) -> dict[str, str | int]:
    """The given fields that are known (not None): ids as text, attempt as a number."""
    out: dict[str, str | int] = {}
    for name, value in (("tenant", tenant), ("job_id", job_id), ("run_id", run_id)):
        if value is not None:
            out[name] = _text(value)
    if isinstance(attempt, int) and not isinstance(attempt, bool):
        out["attempt"] = attempt
    elif attempt is not None:
        out["attempt"] = _text(attempt)
    return out


def record_fields(record: Mapping[str, object]) -> dict[str, str | int]:
    """The fields a message record (a dispatch, a worker report, a command) names."""
    try:
        return log_fields(*(record.get(name) for name in FIELDS))
    except Exception:  # a record too odd to read names nothing: the line is still logged
        return {}
