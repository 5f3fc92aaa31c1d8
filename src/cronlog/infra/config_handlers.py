"""CRONLOG_WORKER_HANDLERS (and `cronlog worker --handlers`): the user's handler modules."""

from __future__ import annotations

from cronlog.infra.config import ConfigError
from cronlog.worker.user_handlers import check_specs


def worker_handlers_from(text: str,
                         setting: str = "CRONLOG_WORKER_HANDLERS") -> tuple[str, ...]:
    """Comma-separated `module[:attr]` items; a malformed one is a ConfigError naming it."""
    try:
        return check_specs([item.strip() for item in text.split(",") if item.strip()],
                           setting)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
