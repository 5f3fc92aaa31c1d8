"""Webhook signatures per the Standard Webhooks specification (docs/alerts.md).

A secret is `whsec_` followed by the standard base64 of 24 to 64 bytes. A request carries
three headers: `webhook-id` (the delivery's stable id: the same on every retry),
`webhook-timestamp` (integer Unix seconds of this attempt) and `webhook-signature`: one
`v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>." + body)>` per secret, separated by
spaces, so that during a rotation a receiver holding either the old or the new secret
accepts the request.

No channel secret is ever stored: derive_channel_secret makes it from the operator's key,
the channel's id and its rotation number, so the event log holds only the rotation number.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Sequence
from uuid import UUID

SECRET_PREFIX = "whsec_"
MIN_SECRET_BYTES = 24
MAX_SECRET_BYTES = 64
# The operator's key derives every channel's secret: at least as strong as one HMAC-SHA256
# output.
MIN_OPERATOR_KEY_BYTES = 32
# A rotation keeps the old secret valid beside the new one for a while: a handful is plenty,
# and it bounds the header.
MAX_SECRETS = 4
SIGNATURE_VERSION = "v1"
# The id is a header value and part of the signed content "<id>.<timestamp>.<body>": no
# '.', no space, so no id and timestamp pair can be read as another.
MSG_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_ROTATION = 2**64 - 1

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


def secret_from_bytes(key: bytes) -> str:
    """The `whsec_` form of a key of 24 to 64 bytes (e.g. from `secrets.token_bytes(32)`)."""
    _check_key_size(len(key))
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def parse_secret(secret: str) -> bytes:
    """The key bytes of a `whsec_` secret; ValueError naming what is wrong with anything
    else. The message never repeats the secret."""
    if not isinstance(secret, str):
        raise ValueError(f"webhook secret: a string, not {type(secret).__name__}")
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"webhook secret: must start with {SECRET_PREFIX!r}")
    encoded = secret[len(SECRET_PREFIX):]
    try:
        key = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise ValueError(f"webhook secret: the part after {SECRET_PREFIX!r} is not standard "
                         "base64 (A-Z a-z 0-9 + /, '=' padded)") from None
    if base64.b64encode(key).decode("ascii") != encoded:
        raise ValueError(f"webhook secret: the part after {SECRET_PREFIX!r} is not base64 in "
                         "its one canonical form (padding or trailing bits)")
    _check_key_size(len(key))
    return key


def signature(key: bytes, msg_id: str, timestamp_seconds: int, body: bytes) -> str:
    """One `v1,<base64>` signature of a request with the given key bytes."""
    _check_msg_id(msg_id)
    _check_timestamp(timestamp_seconds)
    signed = f"{msg_id}.{timestamp_seconds}.".encode("ascii") + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def sign(secrets: str | Sequence[str], msg_id: str, timestamp_seconds: int,
         body: bytes) -> dict[str, str]:
    """The three headers of a request: one signature per secret (1 to MAX_SECRETS of them,
    in the order given), space-separated."""
    chosen = [secrets] if isinstance(secrets, str) else list(secrets)
    if not 1 <= len(chosen) <= MAX_SECRETS:
        raise ValueError(f"webhook secrets: 1 to {MAX_SECRETS}, not {len(chosen)}")
    signatures = " ".join(signature(parse_secret(secret), msg_id, timestamp_seconds, body)
                          for secret in chosen)
    return {ID_HEADER: msg_id, TIMESTAMP_HEADER: str(timestamp_seconds),
            SIGNATURE_HEADER: signatures}


def derive_channel_secret(operator_key: bytes, channel_id: UUID, rotation: int) -> str:
    """The channel's secret for a rotation number: HMAC-SHA256(operator_key, the channel
    id's 16 bytes + the rotation as 8 bytes big-endian), in `whsec_` form (32 bytes). The
    same inputs give the same secret on every notifier; rotating is rotation + 1."""
    if len(operator_key) < MIN_OPERATOR_KEY_BYTES:
        raise ValueError(f"operator key: at least {MIN_OPERATOR_KEY_BYTES} bytes, "
                         f"not {len(operator_key)}")
    if isinstance(rotation, bool) or not isinstance(rotation, int) \
            or not 0 <= rotation <= MAX_ROTATION:
        raise ValueError(f"secret rotation: an integer from 0 to 2**64 - 1, not {rotation!r}")
    derived = hmac.new(operator_key, channel_id.bytes + rotation.to_bytes(8, "big"),
                       hashlib.sha256).digest()
    return secret_from_bytes(derived)


def _check_key_size(size: int) -> None:
    if not MIN_SECRET_BYTES <= size <= MAX_SECRET_BYTES:
        raise ValueError(f"webhook secret: {size} bytes of key; must be "
                         f"{MIN_SECRET_BYTES} to {MAX_SECRET_BYTES}")


def _check_msg_id(msg_id: str) -> None:
    if not isinstance(msg_id, str) or not MSG_ID_PATTERN.fullmatch(msg_id):
        raise ValueError(f"webhook id: must match {MSG_ID_PATTERN.pattern}, "
                         f"not {str(msg_id)[:40]!r}")


def _check_timestamp(timestamp_seconds: int) -> None:
    if isinstance(timestamp_seconds, bool) or not isinstance(timestamp_seconds, int) \
            or timestamp_seconds < 0:
        raise ValueError(f"webhook timestamp: whole Unix seconds, 0 or more, "
                         f"not {timestamp_seconds!r}")
