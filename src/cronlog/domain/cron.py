"""Cron expressions: parsing (via croniter's field expansion) and matching local dates."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date

from croniter import croniter
from croniter.croniter import CroniterError

from cronlog.domain.errors import InvalidSpec

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _values(field: list[int | str], low: int, high: int) -> tuple[int, ...]:
    if field == ["*"]:
        return tuple(range(low, high + 1))
    return tuple(sorted({int(v) for v in field}))


@dataclass(frozen=True)
class CronFields:
    """An expanded cron expression: the values each field allows."""

    expression: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: tuple[int, ...]
    last_day: bool
    months: tuple[int, ...]
    weekdays: tuple[int, ...]  # 0 = Sunday, as in cron
    nth_weekdays: tuple[tuple[int, int], ...]  # (weekday, n): the n-th such weekday
    day_restricted: bool
    weekday_restricted: bool
    # Invariant 7: a wildcard or step in the hour field follows elapsed time across DST.
    hour_follows_elapsed_time: bool

    def matches_date(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        weekday = (d.weekday() + 1) % 7
        day_ok = d.day in self.days or (
            self.last_day and d.day == calendar.monthrange(d.year, d.month)[1])
        weekday_ok = weekday in self.weekdays or any(
            weekday == wd and (d.day - 1) // 7 + 1 == n for wd, n in self.nth_weekdays)
        if self.day_restricted and self.weekday_restricted:
            # Vixie cron: when both day fields are restricted, either one matching is enough.
            return day_ok or weekday_ok
        if self.day_restricted:
            return day_ok
        if self.weekday_restricted:
            return weekday_ok
        return True


# Every value of every field listed one by one takes about 530 characters.
MAX_CRON_CHARS = 1024


def parse_cron(expression: str, field: str = "spec.schedule.cron") -> CronFields:
    if len(expression) > MAX_CRON_CHARS:
        raise InvalidSpec(field, f"a cron expression is at most {MAX_CRON_CHARS} characters")
    text = " ".join(expression.split())
    if not text:
        raise InvalidSpec(field, "a cron expression is required")
    text = MACROS.get(text.lower(), text)
    if text.startswith("@"):
        raise InvalidSpec(field, f"unknown macro {expression!r}; use one of {sorted(MACROS)}")
    parts = text.split(" ")
    if len(parts) not in (5, 6):
        raise InvalidSpec(field, f"expected 5 fields, or 6 with seconds first; got {len(parts)}")
    if len(parts) == 6:
        seconds_field, rest = parts[0], parts[1:]
        # croniter puts seconds last; cronlog's 6-field form has them first.
        croniter_text = " ".join([*rest, seconds_field])
    else:
        seconds_field, rest = "0", parts
        croniter_text = text
    if any(c in "?HR" for c in croniter_text.replace("*", "")):
        raise InvalidSpec(field, f"unsupported syntax in {expression!r}")
    try:
        expanded, nth = croniter.expand(croniter_text)
    except (CroniterError, ValueError, KeyError, IndexError) as exc:
        raise InvalidSpec(field, f"invalid cron expression {expression!r}: {exc}") from exc
    minute, hour, dom, month, dow = expanded[:5]
    second = expanded[5] if len(expanded) > 5 else [0]
    if "l" in dow:
        raise InvalidSpec(field, "'L' is only supported in the day-of-month field")
    hour_text = rest[1]
    nth_pairs = tuple(sorted((int(wd) % 7, int(n)) for wd, ns in nth.items() for n in ns))
    weekdays = tuple(sorted({int(v) % 7 for v in dow if v != "*"})) if dow != ["*"] else tuple(
        range(7))
    if nth_pairs:
        weekdays = tuple(wd for wd in weekdays if wd not in {p[0] for p in nth_pairs})
    return CronFields(
        expression=expression,
        seconds=_values(second, 0, 59),
        minutes=_values(minute, 0, 59),
        hours=_values(hour, 0, 23),
        days=tuple(sorted(int(v) for v in dom if v not in ("*", "l"))) if dom != ["*"] else tuple(
            range(1, 32)),
        last_day="l" in dom,
        months=_values(month, 1, 12),
        weekdays=weekdays,
        nth_weekdays=nth_pairs,
        day_restricted=dom != ["*"] and not rest[2].startswith("*"),
        weekday_restricted=dow != ["*"] and not rest[4].startswith("*"),
        hour_follows_elapsed_time=hour_text == "*" or "/" in hour_text,
    )
