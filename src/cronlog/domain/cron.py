"""Cron expressions: parsing (croniter expands the plain terms, domain/cron_days.py the
Quartz day terms) and matching local dates."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from croniter import croniter
from croniter.croniter import CroniterError

from cronlog.domain.cron_days import DayRule, misplaced_quartz_term, split_day_of_month, split_day_of_week
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

# croniter's hashed (H) and random (R) terms: a schedule must not depend on who parses it.
_HASHED_OR_RANDOM = re.compile(r"(?<![a-z])[hr](?![a-z])")


_RANGE_TERM = re.compile(r"([a-z0-9]+)-([a-z0-9]+)(/\d+)?")


def _single_value_ranges(text: str) -> str:
    """`23-23` (and `23-23/4`) as Debian's cron reads it: the one value 23. croniter reads a
    range that starts where it ends as a full wrap-around cycle (every hour)."""
    terms = []
    for term in text.lower().split(","):
        match = _RANGE_TERM.fullmatch(term)
        if match is not None and (match.group(1) == match.group(2) or (
                match.group(1).isdigit() and match.group(2).isdigit()
                and int(match.group(1)) == int(match.group(2)))):
            term = match.group(1)
        terms.append(term)
    return ",".join(terms)


def _values(field: list[int | str], low: int, high: int) -> tuple[int, ...]:
    # croniter gives ["*"] for a full field, and keeps a `*` inside a list (`*,1`) as is.
    if "*" in field:
        return tuple(range(low, high + 1))
    return tuple(sorted({int(v) for v in field}))


def follows_elapsed_time(time_fields: Sequence[str]) -> bool:
    """Invariant 7, Debian cron's MIN_STAR / HR_STAR test: a job follows elapsed time across
    DST changes when any of its time-of-day fields (minute and hour; second, minute and hour
    with seconds) starts with `*`. Only the first character counts: `*/15` and `*` follow
    elapsed time, `0-6/3` and `1-59/2` are fixed."""
    return any(text.startswith("*") for text in time_fields)


@dataclass(frozen=True)
class CronFields:
    """An expanded cron expression: the values each field allows."""

    expression: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    days: DayRule
    # Invariant 7: see follows_elapsed_time. Otherwise the job is fixed: a local time in a
    # DST gap fires right after it, one that occurs twice fires at its first occurrence.
    follows_elapsed_time: bool

    def matches_date(self, d: date) -> bool:
        return d.month in self.months and self.days.matches(d)


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
    time_fields = parts[:3] if len(parts) == 6 else parts[:2]
    second_text = parts[0] if len(parts) == 6 else "0"
    minute_text, hour_text, dom_text, month_text, dow_text = parts[-5:]
    if "?" in text or _HASHED_OR_RANDOM.search(text.lower()):
        raise InvalidSpec(field, f"unsupported syntax in {expression!r}")
    for name, field_text in (("second", second_text), ("minute", minute_text),
                             ("hour", hour_text), ("month", month_text)):
        if misplaced_quartz_term(field_text):
            raise InvalidSpec(field, f"the {name} field {field_text!r} cannot hold L, W or #: they "
                                     "belong in day-of-month (L, LW, 15W) and day-of-week "
                                     "(5L, 1#2)")
    dom_terms = split_day_of_month(dom_text, field)
    dow_terms = split_day_of_week(dow_text, field)
    # croniter puts seconds last; cronlog's 6-field form has them first.
    croniter_text = " ".join(_single_value_ranges(text) for text in (
        minute_text, hour_text, dom_terms.plain or "*", month_text, dow_terms.plain or "*",
        second_text))
    try:
        expanded, _ = croniter.expand(croniter_text)
    except (CroniterError, ValueError, KeyError, IndexError) as exc:
        raise InvalidSpec(field, f"invalid cron expression {expression!r}: {exc}") from exc
    minute, hour, dom, month, dow, second = expanded
    days = frozenset(_values(dom, 1, 31)) if dom_terms.plain else frozenset()
    weekdays = frozenset(v % 7 for v in _values(dow, 0, 6)) if dow_terms.plain else frozenset()
    return CronFields(
        expression=expression,
        seconds=_values(second, 0, 59),
        minutes=_values(minute, 0, 59),
        hours=_values(hour, 0, 23),
        months=frozenset(_values(month, 1, 12)),
        days=DayRule(days, weekdays, dom_terms, dow_terms,
                     either=not dom_text.startswith("*") and not dow_text.startswith("*")),
        follows_elapsed_time=follows_elapsed_time(time_fields),
    )
