"""An alert as each kind of channel receives it: the webhook's JSON body, a Slack incoming
webhook's payload, an e-mail's subject and plain-text body.

The webhook body is `{"type", "timestamp", "data"}` (the Standard Webhooks payload shape):
`type` is the kind's event type (`run.dead_lettered`, KIND_TEXT), `timestamp` when it
happened (RFC 3339, UTC), `data` the alert's fields under stable names. Its keys are sorted
and it has no spaces: the same alert is the same bytes, so a retry signs the same body.

Every text is bounded (the message to MAX_MESSAGE_BYTES of UTF-8, names and the subject
likewise; a cut text ends in '…'), control characters are replaced by spaces (a subject
and every one-line field keep no line break: no header can be injected), and Slack's
markup characters are escaped: what a handler's error says is shown, never interpreted.
So each rendering is at most a few KiB whatever the alert holds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from cronlog.notifications.model import KIND_TEXT, AlertMessage

MAX_MESSAGE_BYTES = 2 * 1024
MAX_NAME_BYTES = 256
MAX_TENANT_BYTES = 128
MAX_SUBJECT_BYTES = 200
ELLIPSIS = "…"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class EmailText:
    """An e-mail's subject (one line) and plain-text body; the sender adds the headers."""

    subject: str
    body: str


def bounded(text: str, max_bytes: int) -> str:
    """The text, cut to at most `max_bytes` bytes of UTF-8 at a character boundary, ending in
    '…' when cut; what UTF-8 cannot encode (a lone surrogate) as '?'."""
    if max_bytes < len(ELLIPSIS.encode("utf-8")):
        raise ValueError(f"a text's bound: at least 3 bytes, not {max_bytes}")
    encoded = text.encode("utf-8", "replace")  # a lone surrogate becomes '?'
    if len(encoded) <= max_bytes:
        return encoded.decode("utf-8")
    room = max_bytes - len(ELLIPSIS.encode("utf-8"))
    return encoded[:room].decode("utf-8", "ignore") + ELLIPSIS


def one_line(text: str, max_bytes: int) -> str:
    """Control characters (line breaks too) as spaces, then bounded."""
    return bounded(_CONTROL.sub(" ", text), max_bytes)


def message_text(alert: AlertMessage) -> str:
    """The alert's message: line breaks kept, other control characters as spaces,
    bounded to MAX_MESSAGE_BYTES."""
    return bounded(_CONTROL_BUT_NEWLINE.sub(" ", alert.message.replace("\r\n", "\n")),
                   MAX_MESSAGE_BYTES)


def utc_text(at: datetime) -> str:
    """RFC 3339 in UTC with a 'Z': 2026-12-06T14:02:11Z (microseconds when there are)."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def webhook_body(alert: AlertMessage) -> bytes:
    """The webhook request's body: compact JSON, keys sorted, UTF-8."""
    document = {
        "type": KIND_TEXT[alert.kind].event_type,
        "timestamp": utc_text(alert.at),
        "data": {
            "alert_id": str(alert.alert_id),
            "tenant": one_line(alert.tenant, MAX_TENANT_BYTES),
            "kind": alert.kind.value,
            "job_id": str(alert.job_id),
            "job_name": one_line(alert.job_name, MAX_NAME_BYTES),
            "run_id": None if alert.run_id is None else str(alert.run_id),
            "attempt": alert.attempt,
            "message": message_text(alert),
            "digest_count": alert.digest_count,
        },
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def slack_payload(alert: AlertMessage) -> dict[str, str]:
    """A Slack incoming webhook's payload: one `text`, a bold headline, the message quoted,
    then where and when. Slack's markup characters (& < >) are escaped."""
    headline = f"*{_slack(one_line(alert.job_name, MAX_NAME_BYTES))}*: {_headline(alert)}"
    quoted = "\n".join(f"> {_slack(line)}" for line in message_text(alert).split("\n"))
    where = [f"tenant {_slack(one_line(alert.tenant, MAX_TENANT_BYTES))}",
             f"job {alert.job_id}"]
    if alert.run_id is not None:
        where.append(f"run {alert.run_id}")
    where.append(utc_text(alert.at))
    return {"text": f"{headline}\n{quoted}\n{' · '.join(where)}"}


def email_message(alert: AlertMessage) -> EmailText:
    """An e-mail: the subject says which job and what, the body the rest in plain text."""
    words = KIND_TEXT[alert.kind]
    job_name = one_line(alert.job_name, MAX_NAME_BYTES)
    subject = one_line(f"[cronlog] {job_name}: {_headline(alert)}", MAX_SUBJECT_BYTES)
    lines = [f"Job:    {job_name} ({alert.job_id})",
             f"Tenant: {one_line(alert.tenant, MAX_TENANT_BYTES)}",
             f"What:   {words.title}" + (f", {alert.digest_count} folded into this digest"
                                         if alert.digest_count else "")]
    if alert.run_id is not None:
        attempt = f", attempt {alert.attempt}" if alert.attempt is not None else ""
        lines.append(f"Run:    {alert.run_id}{attempt}")
    lines += [f"When:   {utc_text(alert.at)}", "", message_text(alert), "", "-- ",
              f"cronlog alert {alert.alert_id} ({words.event_type})"]
    return EmailText(subject, "\n".join(lines) + "\n")


def _headline(alert: AlertMessage) -> str:
    title = KIND_TEXT[alert.kind].title
    if alert.digest_count:
        return f"{title} ({alert.digest_count} more, digest)"
    if alert.attempt is not None:
        return f"{title} (attempt {alert.attempt})"
    return title


def _slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
