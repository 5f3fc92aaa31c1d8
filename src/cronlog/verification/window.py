"""The stretch of time a verification covers, and its bound."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

# The longest window one verification covers: the history's retention (90 days) is
# what the log holds of run events; a longer window could only be refused later.
MAX_WINDOW = timedelta(days=92)


class InvalidWindow(ValueError):
    """A window verify refuses, naming the option at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class Window:
    """Fire times from `since` (included) to `until` (excluded), aware instants."""

    since: datetime
    until: datetime

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            if getattr(self, name).tzinfo is None:
                raise InvalidWindow(f"--{name}", "an instant with its UTC offset")
        if self.until <= self.since:
            raise InvalidWindow("--until", f"{self.until.isoformat()} is not after --since "
                                           f"{self.since.isoformat()}")
        if self.until - self.since > MAX_WINDOW:
            raise InvalidWindow("--since", f"a window of at most {MAX_WINDOW.days} days "
                                           "(verify it in parts)")

    def holds(self, instant: datetime) -> bool:
        return self.since <= instant < self.until
