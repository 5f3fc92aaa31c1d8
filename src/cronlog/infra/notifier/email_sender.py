"""E-mail channels: the alert as a plain-text message (rendering.email_message), sent to the
channel's recipients through the operator's SMTP server (CRONLOG_SMTP_*, config_alerts.py).

- Off until CRONLOG_SMTP_HOST is set: each delivery then fails at once, not retried, with
  NO_SERVER.
- Every attempt of a delivery has the same Message-ID, derived from the delivery's id, and
  an `X-Cronlog-Delivery-Id` header, so a retry is recognisable (and mail systems that
  dedupe by Message-ID drop it); `Auto-Submitted: auto-generated` keeps out-of-office
  replies away.
- STARTTLS when configured, the server's certificate checked for CRONLOG_SMTP_HOST; the
  login only after it (config_alerts.py refuses a login without it).
- A 4xx reply is retried, a 5xx is not (notifications/outcomes.py); a connection that
  fails or times out is retried. A message the server took for some recipients and
  refused for others is delivered, its error naming those refused: trying again would send
  it twice to the others.
- Bounded: the whole exchange, from connecting to the end of the data, within the
  sender's timeout (every read and write gets what is left of it).

The SMTP server is the operator's, not a tenant's: it is not behind the egress fence (the
fence keeps webhooks away from it instead, infra/outbound_policy.py)."""

from __future__ import annotations

import contextlib
import smtplib
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import format_datetime, parseaddr
from typing import TYPE_CHECKING
from uuid import UUID

from cronlog.domain.channel import ChannelKind
from cronlog.infra.config import Settings
from cronlog.notifications.model import ChannelTarget, Delivery, DeliveryResult
from cronlog.notifications.outcomes import (
    delivered,
    error_text,
    failed,
    smtp_result,
    smtp_retryable,
    unsendable,
)
from cronlog.notifications.rendering import email_message
from cronlog.outbound.pinned_http import Deadline

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

NO_SERVER = "no SMTP server configured (CRONLOG_SMTP_HOST)"
# The whole exchange with the SMTP server; a relay that takes longer is retried later.
SMTP_TIMEOUT_SECONDS = 30.0
DELIVERY_ID_HEADER = "X-Cronlog-Delivery-Id"
# How many refused recipients an error names (a channel has at most 10).
_NAMED_REFUSALS = 3


@dataclass(frozen=True)
class SmtpServer:
    """The operator's SMTP server: `sender` is CRONLOG_SMTP_FROM as written (the From
    header); the envelope's sender is its address. The password stays out of repr."""

    host: str
    port: int
    sender: str
    starttls: bool = False
    username: str = ""
    password: str = field(default="", repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> SmtpServer | None:
        """None when e-mail is off (no CRONLOG_SMTP_HOST)."""
        if not settings.smtp_host:
            return None
        return cls(settings.smtp_host, settings.smtp_port, settings.smtp_from,
                   settings.smtp_starttls, settings.smtp_username, settings.smtp_password)

    @property
    def envelope_sender(self) -> str:
        return parseaddr(self.sender)[1]


def message_id(delivery_id: UUID, sender_address: str) -> str:
    """The Message-ID of every attempt of a delivery, in the sender's domain."""
    domain = sender_address.rpartition("@")[2] or "cronlog.invalid"
    return f"<{delivery_id}.cronlog@{domain}>"


def alert_email(delivery: Delivery, recipients: tuple[str, ...], server: SmtpServer,
                now: datetime) -> EmailMessage:
    """The message of one attempt: the same but for its Date on every attempt."""
    if now.tzinfo is None:
        raise ValueError("now: a time with a zone (UTC), not a naive datetime")
    text = email_message(delivery.alert)
    message = EmailMessage(policy=SMTP_POLICY)
    message["From"] = server.sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = text.subject
    message["Date"] = format_datetime(now.astimezone(UTC))
    message["Message-ID"] = message_id(delivery.delivery_id, server.envelope_sender)
    message[DELIVERY_ID_HEADER] = str(delivery.delivery_id)
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(text.body)
    return message


class _BoundedSMTP(smtplib.SMTP):
    """An SMTP client whose whole exchange ends by a deadline: every command sent and every
    reply read gets what is left of it."""

    def __init__(self, server: SmtpServer, deadline: Deadline, local_hostname: str) -> None:
        """Connects, and reads the server's greeting (STARTTLS checks the certificate for
        the host named here)."""
        self._deadline = deadline
        super().__init__(server.host, server.port, local_hostname, deadline.left())

    def send(self, s: ReadableBuffer | str) -> None:
        self._tighten()
        super().send(s)

    def getreply(self) -> tuple[int, bytes]:
        self._tighten()
        return super().getreply()

    def _tighten(self) -> None:
        if self.sock is not None:
            self.sock.settimeout(self._deadline.left())


def _refusals(refused: Mapping[str, tuple[int, bytes]]) -> str:
    named = [f"{address} ({code} {error_text(reply.decode('utf-8', 'replace'), 80)})"
             for address, (code, reply) in list(refused.items())[:_NAMED_REFUSALS]]
    more = len(refused) - len(named)
    return ", ".join(named) + (f" and {more} more" if more > 0 else "")


class EmailSender:
    """An AlertSender for e-mail channels; safe to share between threads (one connection
    per attempt)."""

    kind = ChannelKind.EMAIL

    def __init__(self, server: SmtpServer | None, timeout_seconds: float = SMTP_TIMEOUT_SECONDS,
                 tls: ssl.SSLContext | None = None, local_hostname: str | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """tls: the context STARTTLS uses (default: the system's authorities, host names
        checked); local_hostname: the EHLO name (default: this host's, looked up once)."""
        if not timeout_seconds > 0:
            raise ValueError(f"SMTP timeout: more than 0 seconds, not {timeout_seconds}")
        self._server = server
        self._timeout = timeout_seconds
        self._tls = tls
        self._local_hostname = local_hostname or (socket.getfqdn() if server else "")
        self._monotonic = monotonic

    def send(self, delivery: Delivery, channel: ChannelTarget, now: datetime) -> DeliveryResult:
        refusal = unsendable(delivery, channel, self.kind)
        if refusal is not None:
            return failed(refusal, 0, False)
        server = self._server
        if server is None:
            return failed(NO_SERVER, 0, False)
        if not channel.recipients:
            return failed("the e-mail channel has no recipients", 0, False)
        try:
            message = alert_email(delivery, channel.recipients, server, now)
        except ValueError as exc:
            return failed(f"cannot write the e-mail: {exc}", 0, False)
        started = self._monotonic()

        def elapsed_ms() -> int:
            return max(0, int((self._monotonic() - started) * 1000))

        where = f"SMTP server {server.host}:{server.port}"
        try:
            refused = self._transmit(server, message, channel.recipients)
        except smtplib.SMTPRecipientsRefused as exc:  # every recipient refused
            codes = [code for code, _ in exc.recipients.values()]
            return failed(f"{where} refused every recipient: {_refusals(exc.recipients)}",
                          elapsed_ms(), any(smtp_retryable(c) for c in codes),
                          codes[0] if codes and 0 <= codes[0] <= 999 else 0)
        except smtplib.SMTPResponseException as exc:
            reply = exc.smtp_error
            text = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else str(reply)
            return smtp_result(exc.smtp_code, text, elapsed_ms())
        except smtplib.SMTPServerDisconnected as exc:  # a read or write that failed too
            return failed(f"{where}: {exc}", elapsed_ms(), True)
        except smtplib.SMTPException as exc:  # STARTTLS or AUTH not offered, and the like
            return failed(f"{where}: {exc}", elapsed_ms(), False)
        except TimeoutError:
            return failed(f"{where} did not finish within {self._timeout:g} s", elapsed_ms(),
                          True)
        except OSError as exc:  # no connection, TLS failed
            return failed(f"{where}: {exc or type(exc).__name__}", elapsed_ms(), True)
        note = f"refused for {_refusals(refused)}" if refused else ""
        return delivered(250, elapsed_ms(), note)

    def _transmit(self, server: SmtpServer, message: EmailMessage,
                  recipients: tuple[str, ...]) -> dict[str, tuple[int, bytes]]:
        """Sends the message; the recipients the server refused when it took it for others."""
        smtp = _BoundedSMTP(server, Deadline(self._timeout, "the SMTP exchange's time"),
                            self._local_hostname)
        try:
            if server.starttls:
                smtp.starttls(context=self._tls or ssl.create_default_context())
            if server.username:
                smtp.login(server.username, server.password)
            refused = smtp.send_message(message, server.envelope_sender, list(recipients))
            # The message is taken: a failed goodbye (an SMTPException is an OSError)
            # changes nothing.
            with contextlib.suppress(OSError):
                smtp.quit()
            return refused
        finally:
            smtp.close()
