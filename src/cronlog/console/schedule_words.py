"""A cron expression in words, for the jobs table. Common shapes only; anything else is
shown as written (the table always shows the expression too)."""

from __future__ import annotations

MACROS = {"@yearly": "every year on 1 January at 00:00", "@annually": "every year on 1 January at 00:00",
          "@monthly": "every month on the 1st at 00:00", "@weekly": "every Sunday at 00:00",
          "@daily": "every day at 00:00", "@midnight": "every day at 00:00",
          "@hourly": "every hour at minute 0"}
DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _every(field: str, unit: str) -> str | None:
    if field == "*":
        return f"every {unit}"
    if field.startswith("*/") and field[2:].isdigit():
        return f"every {int(field[2:])} {unit}s"
    return None


def describe(cron: str) -> str:
    text = cron.strip()
    if text.lower() in MACROS:
        return MACROS[text.lower()]
    fields = text.split()
    seconds = ""
    if len(fields) == 6:
        second, fields = fields[0], fields[1:]
        every = _every(second, "second")
        if every and fields[:4] == ["*", "*", "*", "*"] and fields[4] == "*":
            return every
        seconds = "" if second == "0" else f" (second {second})"
    if len(fields) != 5:
        return text
    minute, hour, dom, month, dow = fields
    if (dom, month) != ("*", "*"):
        return text
    if hour == "*" and dow == "*":
        every = _every(minute, "minute")
        if every:
            return every + seconds
        if minute.isdigit():
            return f"every hour at minute {int(minute)}" + seconds
        return text
    if minute.isdigit() and hour.isdigit():
        at = f"{int(hour):02d}:{int(minute):02d}"
        if dow == "*":
            return f"every day at {at}" + seconds
        if dow.isdigit() and int(dow) < len(DAYS):
            return f"every {DAYS[int(dow)]} at {at}" + seconds
        if dow == "1-5":
            return f"weekdays at {at}" + seconds
    return text
