"""The instants and durations cronlog accepts.

Every store a time reaches must hold it: ClickHouse 18.16's DateTime stops before 2106 and
starts at the epoch, Postgres and Avro timestamp-micros hold far more, Python's datetime
stops at 9999. One range for all of them, checked when a request arrives and again by the
domain, means no stored event can later fail in a projection or overflow in arithmetic.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from cronlog.domain.errors import InvalidSpec

# Channels (domain/channel.py) are named like calendars and queues; a job's notify rule
# (domain/notify_rule.py) names them too.
CHANNEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,128}")

EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
# Exclusive: instants are accepted up to, not including, this one.
END_OF_TIME = datetime(2100, 1, 1, tzinfo=UTC)
# The instant just before the range: "after" this, a schedule's first answer is in range.
BEFORE_EARLIEST = EARLIEST_INSTANT - timedelta(microseconds=1)
RANGE_TEXT = "between 1970-01-01T00:00:00Z and 2100-01-01T00:00:00Z (exclusive)"

# Timeouts, heartbeat timeouts and backoffs: long enough for any real job, short enough that
# adding one to an instant in range stays far inside what datetime holds.
LONGEST_DURATION = timedelta(days=7)
LONGEST_SPREAD = timedelta(hours=1)
MOST_PREVIEWED = 1000
# An attempt's progress (a handler's heartbeat details), at most; longer ones are cut.
MAX_PROGRESS_BYTES = 1024


def in_range(value: datetime) -> bool:
    """Whether an aware instant lies in the accepted range; never raises on extreme values
    (comparing aware datetimes does no arithmetic that could overflow)."""
    return EARLIEST_INSTANT <= value < END_OF_TIME


def require_in_range(value: datetime, field: str) -> datetime:
    """The aware instant `value` in UTC, or InvalidSpec naming the field."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSpec(field, "a time must carry its UTC offset")
    if not in_range(value):
        raise InvalidSpec(field, f"{value.isoformat()} is out of range: times must be "
                                 f"{RANGE_TEXT}")
    return value.astimezone(UTC)


def require_duration(value: timedelta, field: str, longest: timedelta = LONGEST_DURATION,
                     allow_zero: bool = False) -> timedelta:
    """A duration from zero (or just above it) to `longest`, or InvalidSpec naming the field."""
    if value < timedelta(0) or (value == timedelta(0) and not allow_zero):
        qualifier = "must not be negative" if allow_zero else "must be positive"
        raise InvalidSpec(field, f"{qualifier}, got {value.total_seconds()}s")
    if value > longest:
        raise InvalidSpec(field, f"must be at most {_text(longest)}, "
                                 f"got {value.total_seconds():.0f}s")
    return value


def require_count(value: int, field: str, most: int) -> int:
    if not 0 <= value <= most:
        raise InvalidSpec(field, f"must be between 0 and {most}, got {value}")
    return value


def _text(value: timedelta) -> str:
    if value % timedelta(days=1) == timedelta(0):
        return f"{value.days} days"
    if value % timedelta(hours=1) == timedelta(0):
        hours = int(value / timedelta(hours=1))
        return f"{hours} hour" + ("s" if hours != 1 else "")
    return f"{value.total_seconds():.0f}s"


def require_interval(after: datetime, until: datetime) -> tuple[datetime, datetime]:
    """A backfill's interval (`from`, `until`], both ends in range, or InvalidSpec naming
    the end that is not."""
    return require_in_range(after, "from"), require_in_range(until, "until")
