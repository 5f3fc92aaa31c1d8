"""Webhook signing (notifications/signing.py) checked against the published Standard
Webhooks library: what cronlog signs, `standardwebhooks.Webhook(secret).verify` accepts,
with either secret of a rotation; what it refuses, the library refuses too."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronlog.notifications import signing
from cronlog.notifications.signing import (
    MAX_SECRETS,
    derive_channel_secret,
    parse_secret,
    secret_from_bytes,
    sign,
)
from tests.support.examples import examples

CHANNEL = UUID("5b0e3c52-8a1d-4d3e-9f6a-2c7b1e0d4a93")
OPERATOR_KEY = bytes(range(32))
BODY = json.dumps({"type": "run.dead_lettered", "data": {"job": "nightly"}}).encode()


def now_seconds() -> int:
    # The library refuses a timestamp more than 5 minutes from its clock.
    return int(time.time())


def key(fill: int, size: int = 32) -> bytes:
    return bytes([fill]) * size


def test_a_signed_request_verifies_with_the_published_library() -> None:
    secret = secret_from_bytes(key(7))
    headers = sign(secret, "3f2b8c1e-0d4a-4c5e-8b7f-1a2d3e4f5a6b", now_seconds(), BODY)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)


def test_a_changed_body_id_or_timestamp_or_another_secret_does_not_verify() -> None:
    secret = secret_from_bytes(key(7))
    ts = now_seconds()
    headers = sign(secret, "msg_1", ts, BODY)
    for body, changed in ((BODY + b" ", headers),
                          (BODY, {**headers, "webhook-id": "msg_2"}),
                          (BODY, {**headers, "webhook-timestamp": str(ts - 1)})):
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(body, changed)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret_from_bytes(key(8))).verify(BODY, headers)


def test_during_a_rotation_either_secret_verifies_and_each_signature_is_its_own() -> None:
    old, new = secret_from_bytes(key(1)), secret_from_bytes(key(2))
    headers = sign([old, new], "msg_rotating", now_seconds(), BODY)
    parts = headers["webhook-signature"].split(" ")
    assert len(parts) == 2 and all(p.startswith("v1,") for p in parts)
    assert parts[0] == sign(old, "msg_rotating", int(headers["webhook-timestamp"]),
                            BODY)["webhook-signature"]
    for secret in (old, new):
        assert Webhook(secret).verify(BODY, headers) == json.loads(BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret_from_bytes(key(3))).verify(BODY, headers)


def test_the_number_of_secrets_is_bounded() -> None:
    secret = secret_from_bytes(key(1))
    with pytest.raises(ValueError, match="webhook secrets: 1 to"):
        sign([], "msg_1", 1, BODY)
    with pytest.raises(ValueError, match="webhook secrets: 1 to"):
        sign([secret] * (MAX_SECRETS + 1), "msg_1", 1, BODY)
    assert len(sign([secret] * MAX_SECRETS, "m", 1, BODY)["webhook-signature"].split()) == 4


# The library takes the time as a datetime: at most 9999-12-31T23:59:59Z.
LAST_SECOND = 253_402_300_799


@settings(max_examples=examples(60), deadline=None)
@given(st.binary(min_size=24, max_size=64), st.from_regex(signing.MSG_ID_PATTERN, fullmatch=True),
       st.integers(min_value=0, max_value=LAST_SECOND), st.binary(max_size=512))
def test_the_signature_is_the_libraries_for_any_secret_id_time_and_body(
        raw: bytes, msg_id: str, ts: int, body: bytes) -> None:
    secret = secret_from_bytes(raw)
    assert parse_secret(secret) == raw
    text = body.decode("latin-1")  # the library signs text; latin-1 is one byte per char
    expected = Webhook(raw).sign(msg_id, datetime.fromtimestamp(ts, UTC), text)
    assert sign(secret, msg_id, ts, text.encode("utf-8"))["webhook-signature"] == expected


@settings(max_examples=examples(50), deadline=None)
@given(st.binary(min_size=24, max_size=64))
def test_the_library_reads_a_secret_as_cronlog_makes_it(raw: bytes) -> None:
    secret = secret_from_bytes(raw)
    assert secret.startswith("whsec_")
    body = b'{"n":1}'
    assert Webhook(secret).verify(body, sign(secret, "m", now_seconds(), body)) == {"n": 1}


@pytest.mark.parametrize(("secret", "reason"), [
    ("", "must start with 'whsec_'"),
    ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "must start with 'whsec_'"),
    ("WHSEC_" + base64.b64encode(key(1)).decode(), "must start with 'whsec_'"),
    ("whsec_", "0 bytes of key; must be 24 to 64"),
    ("whsec_" + base64.b64encode(key(1, 23)).decode(), "23 bytes of key; must be 24 to 64"),
    ("whsec_" + base64.b64encode(key(1, 65)).decode(), "65 bytes of key; must be 24 to 64"),
    ("whsec_" + base64.urlsafe_b64encode(key(0xFB)).decode(), "is not standard base64"),
    ("whsec_" + base64.b64encode(key(1)).decode().rstrip("="), "is not standard base64"),
    ("whsec_" + base64.b64encode(key(1)).decode() + "\n", "is not standard base64"),
    ("whsec_ä" + base64.b64encode(key(1)).decode(), "is not standard base64"),
    # Nonzero bits after the last byte: decodes, but is not the form secret_from_bytes makes.
    ("whsec_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAR==", "canonical form"),
])
def test_a_secret_in_any_other_form_is_refused_saying_what_is_wrong(
        secret: str, reason: str) -> None:
    with pytest.raises(ValueError, match="webhook secret: ") as refused:
        parse_secret(secret)
    assert reason in str(refused.value)
    encoded = secret.removeprefix("whsec_").removeprefix("WHSEC_")
    assert len(encoded) < 8 or encoded not in str(refused.value), "the secret is not repeated"


def test_a_key_outside_24_to_64_bytes_makes_no_secret() -> None:
    for size in (0, 16, 23, 65, 128):
        with pytest.raises(ValueError, match=f"{size} bytes of key"):
            secret_from_bytes(bytes(size))
    assert parse_secret(secret_from_bytes(bytes(24))) == bytes(24)
    assert parse_secret(secret_from_bytes(bytes(64))) == bytes(64)


@pytest.mark.parametrize("msg_id", ["", "a.b", "has space", "x" * 129, "ünï"])
def test_an_id_that_could_be_read_as_another_is_refused(msg_id: str) -> None:
    with pytest.raises(ValueError, match="webhook id: must match"):
        sign(secret_from_bytes(key(1)), msg_id, 1, BODY)


@pytest.mark.parametrize("ts", [-1, True, 1.5, "1"])
def test_the_timestamp_is_whole_seconds(ts: object) -> None:
    with pytest.raises(ValueError, match="webhook timestamp"):
        sign(secret_from_bytes(key(1)), "m", ts, BODY)  # type: ignore[arg-type]


def test_a_channel_secret_is_the_hmac_of_its_id_and_rotation_under_the_operator_key() -> None:
    secret = derive_channel_secret(OPERATOR_KEY, CHANNEL, 3)
    expected = hmac.new(OPERATOR_KEY, CHANNEL.bytes + b"\x00" * 7 + b"\x03",
                        hashlib.sha256).digest()
    assert parse_secret(secret) == expected
    assert secret == derive_channel_secret(OPERATOR_KEY, CHANNEL, 3), "the same every time"
    # Pinned: a change here would make every receiver's stored secret wrong.
    assert secret == "whsec_nnuKAhVSsooyj/c7vz2hliUOPosqjvWQWUN6j9F4Wo8="
    assert Webhook(secret).verify(BODY, sign(secret, "m", now_seconds(), BODY))


def test_each_rotation_channel_and_operator_key_gives_another_secret() -> None:
    other_channel = UUID(int=CHANNEL.int + 1)
    secrets = {derive_channel_secret(OPERATOR_KEY, CHANNEL, 0),
               derive_channel_secret(OPERATOR_KEY, CHANNEL, 1),
               derive_channel_secret(OPERATOR_KEY, CHANNEL, 2**64 - 1),
               derive_channel_secret(OPERATOR_KEY, other_channel, 0),
               derive_channel_secret(bytes(32), CHANNEL, 0)}
    assert len(secrets) == 5


def test_a_short_operator_key_or_a_rotation_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="operator key: at least 32 bytes, not 31"):
        derive_channel_secret(bytes(31), CHANNEL, 0)
    for rotation in (-1, 2**64, True, 1.0):
        with pytest.raises(ValueError, match="secret rotation"):
            derive_channel_secret(OPERATOR_KEY, CHANNEL, rotation)  # type: ignore[arg-type]
