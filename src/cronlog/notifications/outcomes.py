"""What an attempt's answer means for its delivery (docs/alerts.md, "Which answers are
retried"): which HTTP statuses and SMTP replies are worth another attempt, the one-line
bounded error a result carries, and the checks a sender makes before it sends anything.

Pure: the senders (infra/notifier/) observe, these decide.

- HTTP: a 2xx is delivered. 408 (request timeout), 429 (too many requests) and every 5xx
  are retried: the receiver may take it later. A 3xx is not followed (the fence checked
  the URL, not where it points) and, like every other 4xx, is not retried: the same
  request would get the same answer until someone changes the channel or the receiver.
- SMTP: a 4xx reply is a transient failure (RFC 5321 section 4.2.1) and is retried; a 5xx
  is permanent and is not.
- No answer (no connection, a timeout) is retried; a refusal before sending (the fence, a
  channel that cannot be sent to, nothing configured) is not.
"""

from __future__ import annotations

import re

from cronlog.domain.channel import ChannelKind
from cronlog.notifications.model import (
    MAX_ERROR_CHARS,
    ChannelTarget,
    Delivery,
    DeliveryResult,
)

RETRYABLE_STATUSES = frozenset({408, 429})
# How much of a receiver's answer an error quotes: enough for Slack's "channel_not_found"
# or a short problem+json title, not a page of HTML.
MAX_EXCERPT_CHARS = 200
ELLIPSIS = "…"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SPACES = re.compile(r" {2,}")


def error_text(text: str, most: int = MAX_ERROR_CHARS) -> str:
    """One line (control characters as spaces, runs of spaces as one), at most `most`
    characters, ending in '…' when cut."""
    line = _SPACES.sub(" ", _CONTROL.sub(" ", text)).strip()
    if len(line) <= most:
        return line
    return line[:most - len(ELLIPSIS)] + ELLIPSIS


def delivered(status_code: int, latency_ms: int, note: str = "") -> DeliveryResult:
    return DeliveryResult(True, status_code, latency_ms, error_text(note))


def failed(error: str, latency_ms: int, retryable: bool, status_code: int = 0) -> DeliveryResult:
    return DeliveryResult(False, status_code, latency_ms, error_text(error), retryable)


def retryable_status(status: int) -> bool:
    """Whether an HTTP status other than 2xx is worth another attempt."""
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


def _excerpt(body: bytes) -> str:
    return error_text(body.decode("utf-8", "replace"), MAX_EXCERPT_CHARS)


def http_result(status: int, latency_ms: int, body: bytes = b"",
                redirect_host: str = "") -> DeliveryResult:
    """An HTTP answer as a result; the error quotes the start of the body, or for a 3xx
    names the host its Location points to (the sender reads it: "" for none)."""
    if 200 <= status <= 299:
        return delivered(status, latency_ms)
    if 300 <= status <= 399:
        where = error_text(redirect_host, 100) or "no other host"
        return failed(f"HTTP {status}: redirects are not followed (Location points to "
                      f"{where}); point the channel at the final URL", latency_ms, False,
                      status)
    excerpt = _excerpt(body)
    return failed(f"HTTP {status}" + (f": {excerpt}" if excerpt else ""), latency_ms,
                  retryable_status(status), status)


def smtp_retryable(code: int) -> bool:
    """Whether an SMTP reply code is a transient failure (4xx)."""
    return 400 <= code <= 499


def smtp_result(code: int, reply: str, latency_ms: int) -> DeliveryResult:
    """An SMTP server's refusal as a result: retried for a 4xx, not for a 5xx (nor for a
    code that is neither, which no server should send)."""
    code = code if 0 <= code <= 999 else 0
    return failed(f"SMTP {code}: {error_text(reply, MAX_EXCERPT_CHARS)}", latency_ms,
                  smtp_retryable(code), code)


def unsendable(delivery: Delivery, channel: ChannelTarget, kind: ChannelKind) -> str | None:
    """Why a sender of `kind` must not send this delivery to this channel, or None. A
    delivery only ever goes to its own channel of its own tenant (invariant 10)."""
    if delivery.channel_id != channel.channel_id:
        return (f"delivery {delivery.delivery_id} is for channel {delivery.channel_id}, "
                f"not {channel.channel_id}")
    if delivery.tenant != channel.tenant:
        return f"delivery {delivery.delivery_id} is not for the channel's tenant"
    if channel.kind is not kind:
        return f"a {kind} sender cannot send to a {channel.kind} channel"
    return None
