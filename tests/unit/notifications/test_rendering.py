"""What each channel receives (notifications/rendering.py): the webhook body's stable shape
and bytes (signed, it verifies with the published library), Slack's readable and escaped
text, an e-mail with a one-line subject; every text bounded whatever the alert holds."""

from __future__ import annotations

import json
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from cronlog.domain.notify_rule import AlertKind
from cronlog.notifications.model import KIND_TEXT, AlertMessage
from cronlog.notifications.rendering import (
    MAX_MESSAGE_BYTES,
    MAX_SUBJECT_BYTES,
    EmailText,
    bounded,
    email_message,
    slack_payload,
    webhook_body,
)
from cronlog.notifications.signing import secret_from_bytes, sign
from tests.support.examples import examples
from tests.support.notifications import alert, sample_id

SAMPLE = alert()
EXPECTED_BODY = (
    f'{{"data":{{"alert_id":"{SAMPLE.alert_id}","attempt":3,"digest_count":0,'
    f'"job_id":"{SAMPLE.job_id}","job_name":"nightly","kind":"dead_lettered",'
    f'"message":"exit status 1","run_id":"{SAMPLE.run_id}","tenant":"acme"}},'
    '"timestamp":"2026-12-06T14:02:11Z","type":"run.dead_lettered"}')


def test_the_webhook_body_has_stable_names_and_bytes() -> None:
    assert webhook_body(alert()).decode() == EXPECTED_BODY
    assert webhook_body(alert()) == webhook_body(alert()), "a retry signs the same bytes"


def test_each_kind_has_its_type_and_a_job_alert_may_have_no_run() -> None:
    for kind in AlertKind:
        body = json.loads(webhook_body(alert(kind=kind, run_id=None, attempt=None)))
        assert body["type"] == KIND_TEXT[kind].event_type
        assert body["data"]["kind"] == kind.value
        assert (body["data"]["run_id"], body["data"]["attempt"]) == (None, None)


def test_a_signed_body_verifies_with_the_published_library() -> None:
    secret = secret_from_bytes(bytes(range(32)))
    body = webhook_body(alert(message="naïve 💥 \"quoted\""))
    headers = sign(secret, str(sample_id("delivery")), int(time.time()), body)
    assert Webhook(secret).verify(body, headers)["data"]["message"] == "naïve 💥 \"quoted\""


def test_slack_gets_one_readable_text_with_its_markup_escaped() -> None:
    payload = slack_payload(alert(message="boom <!channel> & <https://x|y>\nsecond line"))
    assert list(payload) == ["text"]
    lines = payload["text"].split("\n")
    assert lines[0] == "*nightly*: run dead-lettered (attempt 3)"
    assert lines[1:3] == ["> boom &lt;!channel&gt; &amp; &lt;https://x|y&gt;", "> second line"]
    assert lines[3].startswith("tenant acme · job ") and lines[3].endswith("2026-12-06T14:02:11Z")
    assert "<" not in payload["text"]


def test_a_digest_reads_as_one() -> None:
    digest = alert(kind=AlertKind.FAILED, run_id=None, attempt=None, digest_count=12,
                   message="12 more failures since 14:02:11Z")
    assert slack_payload(digest)["text"].split("\n")[:2] == [
        "*nightly*: attempt failed (12 more, digest)", "> 12 more failures since 14:02:11Z"]
    mail = email_message(digest)
    assert mail.subject == "[cronlog] nightly: attempt failed (12 more, digest)"
    assert "What:   attempt failed, 12 folded into this digest" in mail.body
    assert "Run:" not in mail.body


def test_an_email_has_a_one_line_subject_and_a_plain_text_body() -> None:
    mail = email_message(alert(job_name="nightly\r\nBcc: everyone@example.com",
                               message="line one\r\nline two"))
    assert isinstance(mail, EmailText)
    assert "\r" not in mail.subject and "\n" not in mail.subject
    assert mail.subject.startswith("[cronlog] nightly  Bcc: everyone@example.com: run ")
    body = mail.body.split("\n")
    assert body[0].startswith("Job:    nightly  Bcc: everyone@example.com (")
    assert f"Run:    {alert().run_id}, attempt 3" in body
    assert "line one\nline two\n" in mail.body and "\r" not in mail.body
    assert body[-2] == f"cronlog alert {alert().alert_id} (run.dead_lettered)"


def test_a_long_message_is_cut_to_2_kib_at_a_character_boundary() -> None:
    long = alert(message="é" * 5_000)
    data = json.loads(webhook_body(long))["data"]
    assert len(data["message"].encode()) <= MAX_MESSAGE_BYTES
    assert data["message"].endswith("…") and data["message"].startswith("é" * 1000)
    assert bounded("abc", 3) == "abc" and bounded("abcd", 3) == "…"
    assert bounded("\ud800x", 10) == "?x"


texts = st.text(st.characters(codec=None), max_size=3_000)


@settings(max_examples=examples(100), deadline=None)
@given(texts, texts, texts, st.integers(0, 10**6), st.sampled_from(list(AlertKind)))
def test_every_rendering_is_bounded_whatever_the_alert_holds(
        message: str, job_name: str, tenant: str, count: int, kind: AlertKind) -> None:
    a = AlertMessage(sample_id("alert"), tenant, kind, sample_id("job"), job_name, None, None,
                     message, alert().at, count)
    body = webhook_body(a)
    data = json.loads(body)["data"]
    assert len(data["message"].encode()) <= MAX_MESSAGE_BYTES
    assert len(body) <= 6 * 1024  # JSON writes " and \ in two bytes
    assert "\n" not in data["job_name"] + data["tenant"]
    assert len(slack_payload(a)["text"].encode()) <= 16 * 1024
    mail = email_message(a)
    assert len(mail.subject.encode()) <= MAX_SUBJECT_BYTES
    assert not any(c in mail.subject for c in "\r\n\x00\u2028")
    assert len(mail.body.encode()) <= 4 * 1024
