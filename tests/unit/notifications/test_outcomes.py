"""What an attempt's answer means (notifications/outcomes.py): which answers are retried,
the bounded one-line error, and the checks before anything is sent; and the shapes of a
channel target and a result (model.py)."""

from __future__ import annotations

import pytest

from cronlog.domain.channel import ChannelKind
from cronlog.notifications.model import MAX_ERROR_CHARS, ChannelTarget, DeliveryResult
from cronlog.notifications.outcomes import (
    error_text,
    failed,
    http_result,
    retryable_status,
    smtp_result,
    unsendable,
)
from cronlog.notifications.signing import secret_from_bytes
from tests.support.notifications import channel, delivery


@pytest.mark.parametrize(("status", "retryable"), [
    (408, True), (429, True), (500, True), (502, True), (503, True), (599, True),
    (400, False), (401, False), (403, False), (404, False), (410, False), (413, False),
    (422, False)])
def test_408_429_and_5xx_are_retried_other_4xx_are_not(status: int, retryable: bool) -> None:
    assert retryable_status(status) is retryable
    result = http_result(status, 12, b"channel_not_found")
    assert (result.ok, result.status_code, result.latency_ms, result.retryable) == \
        (False, status, 12, retryable)
    assert result.error == f"HTTP {status}: channel_not_found"


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_a_2xx_is_delivered(status: int) -> None:
    assert http_result(status, 3, b"ignored") == DeliveryResult(True, status, 3)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_fails_naming_the_host_and_is_not_retried(status: int) -> None:
    result = http_result(status, 5, redirect_host="169.254.169.254")
    assert not result.ok and not result.retryable and result.status_code == status
    assert result.error == (f"HTTP {status}: redirects are not followed (Location points to "
                            "169.254.169.254); point the channel at the final URL")
    assert "no other host" in http_result(302, 5).error


def test_a_receivers_answer_is_quoted_on_one_bounded_line() -> None:
    result = http_result(500, 1, b"<html>\r\n  <h1>Bad\tgateway</h1>\n" + b"x" * 5000)
    assert result.error.startswith("HTTP 500: <html> <h1>Bad gateway</h1> xxx")
    assert result.error.endswith("…") and len(result.error) <= 220
    assert http_result(503, 1, b"\xff\xfe broken utf-8").error == "HTTP 503: �� broken utf-8"
    assert http_result(404, 1).error == "HTTP 404"


def test_an_error_is_one_line_of_at_most_500_characters() -> None:
    text = error_text("line one\nline two\x00" + "y" * 1000)
    assert len(text) == MAX_ERROR_CHARS and text.endswith("…")
    assert text.startswith("line one line two y")
    assert failed("z" * 900, 1, True).error == "z" * 499 + "…"


@pytest.mark.parametrize(("code", "retryable"), [
    (421, True), (450, True), (451, True), (452, True), (454, True),
    (500, False), (535, False), (550, False), (552, False), (554, False)])
def test_smtp_4xx_is_retried_5xx_is_not(code: int, retryable: bool) -> None:
    result = smtp_result(code, "5.1.1 no such\r\nuser", 40)
    assert (result.ok, result.status_code, result.retryable) == (False, code, retryable)
    assert result.error == f"SMTP {code}: 5.1.1 no such user"


def test_a_result_is_checked() -> None:
    with pytest.raises(ValueError, match="an ok result is not retried"):
        DeliveryResult(True, 200, 1, "", True)
    with pytest.raises(ValueError, match="one line of at most 500"):
        DeliveryResult(False, 0, 1, "x" * 501)
    with pytest.raises(ValueError, match="one line"):
        DeliveryResult(False, 0, 1, "a\nb")
    with pytest.raises(ValueError, match="status_code"):
        DeliveryResult(False, 1000, 1)
    with pytest.raises(ValueError, match="latency_ms"):
        DeliveryResult(False, 0, -1)


def test_a_target_keeps_its_secrets_out_of_repr() -> None:
    secret = secret_from_bytes(b"k" * 32)
    target = ChannelTarget(channel("acme"), "acme", ChannelKind.WEBHOOK,
                           "https://hooks.example.com/x", signing_secrets=(secret,))
    assert secret not in repr(target) and "hooks.example.com" in repr(target)
    with pytest.raises(ValueError, match="at most 4"):
        ChannelTarget(channel("acme"), "acme", ChannelKind.WEBHOOK, "https://h.example",
                      signing_secrets=(secret,) * 5)
    with pytest.raises(ValueError, match="ChannelKind"):
        ChannelTarget(channel("acme"), "acme", "webhook")  # type: ignore[arg-type]


def test_a_delivery_goes_only_to_its_own_channel_of_its_own_tenant() -> None:
    mine = delivery("acme", to=0)
    target = ChannelTarget(channel("acme", 0), "acme", ChannelKind.WEBHOOK, "https://h.example")
    assert unsendable(mine, target, ChannelKind.WEBHOOK) is None
    other_channel = ChannelTarget(channel("acme", 1), "acme", ChannelKind.WEBHOOK, "https://h.example")
    assert "is for channel" in str(unsendable(mine, other_channel, ChannelKind.WEBHOOK))
    other_tenant = ChannelTarget(channel("acme", 0), "globex", ChannelKind.WEBHOOK,
                                 "https://h.example")
    assert "not for the channel's tenant" in str(
        unsendable(mine, other_tenant, ChannelKind.WEBHOOK))
    assert unsendable(mine, target, ChannelKind.SLACK) == \
        "a slack sender cannot send to a webhook channel"
