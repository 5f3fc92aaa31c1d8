"""A schedule in words ("at 02:30 on weekdays, Europe/Berlin"), for PreviewSchedule and the
CLI. Common shapes are named; any field this module has no words for is quoted as written,
so the description is never wrong, only sometimes terse."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronlog.domain.cron import MACROS, CronFields, parse_cron

DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
DAY_ABBREVIATIONS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August",
               "September", "October", "November", "December")
_MONTH_ABBREVIATIONS = {name[:3].lower(): name for name in MONTH_NAMES}
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
# Up to this many times of day are listed one by one ("at 09:00 and 17:30").
MOST_LISTED_TIMES = 4


def describe_cron(expression: str, time_zone: str) -> str:
    text = " ".join(expression.split())
    fields = parse_cron(text)
    parts = MACROS.get(text.lower(), text).split(" ")
    second, rest = (parts[0], parts[1:]) if len(parts) == 6 else ("0", parts)
    minute, hour, dom, month, dow = rest
    times, days = _times(fields, second, minute, hour), _days(dom, dow)
    if "every" in times.split() and days == "every day":
        days = ""
    words = [times, days, _months(month)]
    return " ".join(w for w in words if w) + f", {time_zone}"


def describe_interval(every: timedelta, phase: datetime | None, time_zone: str) -> str:
    start = ("from " + phase.isoformat().replace("+00:00", "Z") if phase is not None
             else "on the grid from 1970-01-01T00:00Z")
    return f"every {duration_words(every)} {start} (elapsed time), shown in {time_zone}"


def duration_words(value: timedelta) -> str:
    ms = value // timedelta(milliseconds=1)
    for unit_ms, unit in ((86_400_000, "day"), (3_600_000, "hour"), (60_000, "minute"),
                          (1000, "second")):
        if ms % unit_ms == 0:
            n = ms // unit_ms
            return unit if n == 1 else f"{n} {unit}s"
    return f"{ms} ms"


def _clock(hour: int, minute: int, second: int) -> str:
    return f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second else "")


def _step(text: str, unit: str) -> str | None:
    if text == "*":
        return f"every {unit}"
    if text.startswith("*/") and text[2:].isdigit():
        return f"every {int(text[2:])} {unit}s"
    return None


def _times(fields: CronFields, second: str, minute: str, hour: str) -> str:
    count = len(fields.hours) * len(fields.minutes) * len(fields.seconds)
    if count <= MOST_LISTED_TIMES:
        times = [_clock(h, m, s) for h in fields.hours for m in fields.minutes
                 for s in fields.seconds]
        return "at " + _and(times)
    hour_words = ("" if hour == "*" else
                  f" during hour {fields.hours[0]:02d}" if len(fields.hours) == 1 else
                  f" during hours {hour}")
    if second != "0" or len(fields.seconds) > 1:
        every_second = _step(second, "second")
        if every_second and minute == "*":
            return every_second + hour_words
        return f"at second {second} of minute {minute}{hour_words}"
    every_minute = _step(minute, "minute")
    if every_minute:
        return every_minute + hour_words
    if len(fields.minutes) == 1:
        past = f"at minute {fields.minutes[0]}"
        return past + (" of every hour" if hour == "*" else hour_words)
    return f"at minutes {minute}" + (" of every hour" if hour == "*" else hour_words)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _weekday_name(term: str) -> str | None:
    low = term.lower()
    if low.isdigit() and int(low) <= 7:
        return DAY_NAMES[int(low) % 7]
    if low in DAY_ABBREVIATIONS:
        return DAY_NAMES[DAY_ABBREVIATIONS.index(low)]
    return None


def _weekday_term(term: str) -> str:
    low = term.lower()
    if low in ("1-5", "mon-fri"):
        return "weekdays"
    if low in ("0,6", "6,0", "sat,sun", "sun,sat", "6-7"):
        return "weekends"
    if low.endswith("l") and (name := _weekday_name(low[:-1])):
        return f"the last {name} of the month"
    if "#" in low:
        day, nth = low.split("#", 1)
        name = _weekday_name(day)
        if name and nth.isdigit() and int(nth) in ORDINALS:
            return f"the {ORDINALS[int(nth)]} {name} of the month"
    name = _weekday_name(low)
    return f"{name}s" if name else f"day-of-week {term}"


def _month_day_term(term: str) -> str:
    low = term.lower()
    if low == "l":
        return "the last day of the month"
    if low == "lw":
        return "the last weekday of the month"
    if low.endswith("w") and low[:-1].isdigit():
        return f"the weekday nearest day {int(low[:-1])}"
    if low.isdigit():
        return f"day {int(low)} of the month"
    return f"days {term} of the month"


def _days(dom: str, dow: str) -> str:
    day_words = None if dom.startswith("*") else _and([_month_day_term(t)
                                                      for t in _terms(dom, numeric=True)])
    week_words = None if dow.startswith("*") else _and([_weekday_term(t)
                                                       for t in _terms(dow, numeric=False)])
    if day_words and week_words:
        # Vixie cron: with both restricted, either one matching is enough.
        return f"on {day_words} or on {week_words}"
    if day_words or week_words:
        return f"on {day_words or week_words}"
    return "every day"


def _terms(text: str, numeric: bool) -> list[str]:
    """A list's terms, except that a plain list of numbers stays one term ("1,15" is
    "days 1,15 of the month") while named weekdays are listed one by one."""
    terms = text.split(",")
    if numeric and len(terms) > 1 and all(t.isdigit() for t in terms):
        return [text]
    if text.lower() in ("1-5", "mon-fri", "0,6", "6,0", "sat,sun", "sun,sat"):
        return [text]
    return terms


def _months(month: str) -> str:
    if month == "*":
        return ""
    names = [MONTH_NAMES[int(t) - 1] if t.isdigit() and 1 <= int(t) <= 12 else
             _MONTH_ABBREVIATIONS.get(t.lower()) for t in month.split(",")]
    if all(names):
        return "in " + _and([n for n in names if n])
    return f"in months {month}"
