"""The notifier's delivery settings from the environment (docs/alerts.md, "Delivery"):
the operator's SMTP server for e-mail channels and the time a webhook or Slack receiver
has to answer, and the operator's key webhook channels' signing secrets derive from. Each
checked at start, errors naming the variable and never a password or key.

E-mail is off until CRONLOG_SMTP_HOST names a server; the other SMTP settings without it
are an error (the operator meant e-mail, and it would silently not be sent). A username
and a password file go together, and only with STARTTLS: a password never travels in
clear."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from datetime import timedelta
from email.utils import parseaddr
from typing import TypedDict

from cronlog.domain.channel import validate_recipients
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.config import ConfigError
from cronlog.infra.config_values import ENV, flag, millis_within
from cronlog.notifications.signing import MIN_OPERATOR_KEY_BYTES
from cronlog.small_files import read_small_file

HOST_VARIABLE = ENV + "SMTP_HOST"
PORT_VARIABLE = ENV + "SMTP_PORT"
FROM_VARIABLE = ENV + "SMTP_FROM"
STARTTLS_VARIABLE = ENV + "SMTP_STARTTLS"
USERNAME_VARIABLE = ENV + "SMTP_USERNAME"
PASSWORD_FILE_VARIABLE = ENV + "SMTP_PASSWORD_FILE"
SIGNING_KEY_FILE_VARIABLE = ENV + "ALERT_SIGNING_KEY_FILE"
DEFAULT_SMTP_PORT = 25
# A connection and an answer each get this long; long enough for a receiver across the
# world, short enough that a dead one holds a sender for seconds, not minutes.
ALERT_HTTP_TIMEOUT_RANGE_MS = (100, 60_000)
MAX_HOST_CHARS = 253
MAX_FROM_CHARS = 320
MAX_USERNAME_CHARS = 256
MAX_PASSWORD_BYTES = 4096
# The operator's key webhook channels' secrets derive from (notifications/signing.py): at
# least MIN_OPERATOR_KEY_BYTES random bytes; more than this is not a key file.
MAX_SIGNING_KEY_BYTES = 4096
# The notifier's digest interval (notifications/rules.py bounds it), its retries
# (notifications/retry_plan.py), and its senders.
THROTTLE_RANGE_MS = (1_000, 86_400_000)
RETRY_BASE_RANGE_MS = (100, 3_600_000)
RETRY_FOR_RANGE_MS = (0, 31 * 86_400_000)
SENDERS_VARIABLE = ENV + "NOTIFIER_SENDERS"
DEFAULT_SENDERS = 8
MAX_SENDERS = 64

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class AlertSettings(TypedDict):
    smtp_host: str
    smtp_port: int
    smtp_from: str
    smtp_starttls: bool
    smtp_username: str
    smtp_password_file: str
    smtp_password: str
    alert_http_timeout: timedelta
    alert_signing_key_file: str
    alert_throttle: timedelta
    alert_retry_base: timedelta
    alert_retry_for: timedelta
    notifier_senders: int
    alert_signing_key: bytes


def _host(env: Mapping[str, str]) -> str:
    host = env.get(HOST_VARIABLE, "").strip()
    if not host:
        return ""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return host.strip("[]")
    except ValueError:
        pass
    if len(host) > MAX_HOST_CHARS or not _HOST_NAME.fullmatch(host):
        raise ConfigError(f"{HOST_VARIABLE}: expected a host name or IP address (no port: "
                          f"{PORT_VARIABLE}), got {host[:64]!r}")
    return host


def _port(env: Mapping[str, str]) -> int:
    raw = env.get(PORT_VARIABLE, "").strip()
    if raw == "":
        return DEFAULT_SMTP_PORT
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise ConfigError(f"{PORT_VARIABLE}: expected a port from 1 to 65535, got {raw[:16]!r}")
    return int(raw)


def _from(env: Mapping[str, str]) -> str:
    """An address, or `Name <address>`; the address local@domain as a channel's recipients."""
    raw = env.get(FROM_VARIABLE, "").strip()
    if not raw:
        return ""
    if len(raw) > MAX_FROM_CHARS or _CONTROL.search(raw):
        raise ConfigError(f"{FROM_VARIABLE}: one line of at most {MAX_FROM_CHARS} characters")
    _name, address = parseaddr(raw)
    try:
        validate_recipients([address], FROM_VARIABLE)
    except InvalidSpec:
        raise ConfigError(f"{FROM_VARIABLE}: expected an address such as "
                          f"alerts@example.com or 'cronlog <alerts@example.com>', got "
                          f"{raw[:64]!r}") from None
    return raw


def _password(env: Mapping[str, str]) -> tuple[str, str]:
    path = env.get(PASSWORD_FILE_VARIABLE, "").strip()
    if not path:
        return "", ""
    source = f"{PASSWORD_FILE_VARIABLE} {path}"
    raw = read_small_file(path, MAX_PASSWORD_BYTES, source, ConfigError,
                          f"more than {MAX_PASSWORD_BYTES} bytes: the file holds one password")
    try:
        password = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text") from None
    if not password or _CONTROL.search(password):
        raise ConfigError(f"{source}: expected one line, the password (a final line break "
                          "is dropped)")
    return path, password


def _signing_key(env: Mapping[str, str]) -> tuple[str, bytes]:
    """The operator's signing key: the file's bytes as they are (no line break dropped), at
    least MIN_OPERATOR_KEY_BYTES and at most MAX_SIGNING_KEY_BYTES. Unset: no key, and a
    webhook channel cannot be created (its secret could not be derived)."""
    path = env.get(SIGNING_KEY_FILE_VARIABLE, "").strip()
    if not path:
        return "", b""
    source = f"{SIGNING_KEY_FILE_VARIABLE} {path}"
    raw = read_small_file(path, MAX_SIGNING_KEY_BYTES, source, ConfigError,
                          f"more than {MAX_SIGNING_KEY_BYTES} bytes: the file holds one key")
    if len(raw) < MIN_OPERATOR_KEY_BYTES:
        raise ConfigError(f"{source}: {len(raw)} bytes; a key is at least "
                          f"{MIN_OPERATOR_KEY_BYTES} random bytes (head -c 32 /dev/urandom)")
    return path, raw


def alert_settings_from_env(env: Mapping[str, str]) -> AlertSettings:
    """Every variable is read whatever the others say, so that a misspelt one is still
    told apart from one that does not apply."""
    host = _host(env)
    port = _port(env)
    sender = _from(env)
    starttls = flag(env, "SMTP_STARTTLS")
    username = env.get(USERNAME_VARIABLE, "").strip()
    password_file, password = _password(env)
    key_file, key = _signing_key(env)
    timeout = millis_within(env, "ALERT_HTTP_TIMEOUT_MS", timedelta(seconds=5),
                            ALERT_HTTP_TIMEOUT_RANGE_MS)
    throttle, retry_base, retry_for, senders = _notifier(env)
    stray = [name for name, value in ((FROM_VARIABLE, sender), (STARTTLS_VARIABLE, starttls),
                                      (USERNAME_VARIABLE, username),
                                      (PASSWORD_FILE_VARIABLE, password_file)) if value]
    if not host and stray:
        raise ConfigError(f"{', '.join(stray)} apply to e-mail channels only: set "
                          f"{HOST_VARIABLE} to the SMTP server as well")
    if host and not sender:
        raise ConfigError(f"{FROM_VARIABLE}: required with {HOST_VARIABLE} (the sender "
                          "address of alert e-mails)")
    if len(username) > MAX_USERNAME_CHARS or _CONTROL.search(username):
        raise ConfigError(f"{USERNAME_VARIABLE}: one line of at most {MAX_USERNAME_CHARS} "
                          "characters")
    if bool(username) != bool(password):
        raise ConfigError(f"{USERNAME_VARIABLE} and {PASSWORD_FILE_VARIABLE} must be set "
                          "together")
    if username and not starttls:
        raise ConfigError(f"{USERNAME_VARIABLE}: a password must not travel in clear; set "
                          f"{STARTTLS_VARIABLE}=1 as well")
    return AlertSettings(smtp_host=host, smtp_port=port, smtp_from=sender,
                         smtp_starttls=starttls, smtp_username=username,
                         smtp_password_file=password_file, smtp_password=password,
                         alert_http_timeout=timeout, alert_signing_key_file=key_file,
                         alert_signing_key=key, alert_throttle=throttle,
                         alert_retry_base=retry_base, alert_retry_for=retry_for,
                         notifier_senders=senders)


def _notifier(env: Mapping[str, str]) -> tuple[timedelta, timedelta, timedelta, int]:
    senders = env.get(SENDERS_VARIABLE, "").strip() or str(DEFAULT_SENDERS)
    if not senders.isdigit() or not 1 <= int(senders) <= MAX_SENDERS:
        raise ConfigError(f"{SENDERS_VARIABLE}: 1 to {MAX_SENDERS}, not {senders[:20]!r}")
    return (millis_within(env, "ALERT_THROTTLE_MS", timedelta(minutes=1), THROTTLE_RANGE_MS),
            millis_within(env, "ALERT_RETRY_BASE_MS", timedelta(seconds=5),
                          RETRY_BASE_RANGE_MS),
            millis_within(env, "ALERT_RETRY_FOR_MS", timedelta(days=1), RETRY_FOR_RANGE_MS),
            int(senders))
