"""The console's web adapter with a fake api: sign-in and its cookie, CSRF and origin checks
on every POST, confirmation pages with the request id, escaping, security headers."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from cronlog.fleet.announcement import WorkerAnnouncement
from cronlog.infra.console.app import Console, build_app
from cronlog.infra.console.console_base import SESSION_COOKIE
from tests.support.console_api import NOW, FakeApi, FakeHistory, job, run
from tests.support.console_web import BASE, csrf_of

TOKENS = {"tok-a": "alpha", "tok-b": "beta"}


def client_for(api: FakeApi) -> TestClient:
    return TestClient(build_app(Console(api, FakeHistory(), clock=lambda: NOW)), base_url=BASE,
                      follow_redirects=False)


def signed_in(api: FakeApi, token: str = "tok-a") -> TestClient:
    client = client_for(api)
    page = client.get("/signin")
    answer = client.post("/signin", data={"csrf": csrf_of(page.text), "token": token})
    assert answer.status_code == 303, answer.text
    return client


@pytest.fixture
def api() -> FakeApi:
    fake = FakeApi(TOKENS)
    fake.jobs = {"a1": job("a1", name="<script>alert(1)</script>"), "b1": job("b1", "beta",
                                                                              name="beta-only")}
    fake.runs = {"r1": run("r1", "a1", status="running")}
    return fake


def test_pages_need_a_session(api: FakeApi) -> None:
    client = client_for(api)
    assert client.get("/jobs").headers["location"] == "/signin"
    assert client.post("/jobs/a1/pause", data={"csrf": "x"}).status_code == 403


def test_sign_in_sets_an_httponly_strict_cookie_holding_no_token(api: FakeApi) -> None:
    client = client_for(api)
    page = client.get("/signin")
    answer = client.post("/signin", data={"csrf": csrf_of(page.text), "token": "tok-a"})
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(SESSION_COOKIE + "=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "tok-a" not in cookie


def test_a_wrong_token_or_a_missing_signin_csrf_is_refused(api: FakeApi) -> None:
    client = client_for(api)
    page = client.get("/signin")
    wrong = client.post("/signin", data={"csrf": csrf_of(page.text), "token": "guess"})
    assert wrong.status_code == 401 and "unknown token" in wrong.text
    fresh = client_for(api)
    assert fresh.post("/signin", data={"csrf": "made-up", "token": "tok-a"}).status_code == 403


def test_output_is_escaped_and_headers_keep_the_page_to_itself(api: FakeApi) -> None:
    client = signed_in(api)
    page = client.get("/jobs")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "beta-only" not in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_another_tenants_job_is_not_found(api: FakeApi) -> None:
    client = signed_in(api)
    assert client.get("/jobs/b1").status_code == 404
    assert client.get("/jobs/b1/confirm/pause").status_code == 404


def test_an_action_needs_the_sessions_csrf_token_and_the_same_origin(api: FakeApi) -> None:
    client = signed_in(api)
    confirm = client.get("/jobs/a1/confirm/pause")
    request_id = re.search(r'name="request_id" value="([^"]+)"', confirm.text).group(1)  # type: ignore[union-attr]
    assert request_id in confirm.text.split('name="request_id"')[1]
    csrf = csrf_of(confirm.text)
    assert client.post("/jobs/a1/pause", data={"request_id": request_id}).status_code == 403
    assert client.post("/jobs/a1/pause", data={"csrf": "wrong",
                                               "request_id": request_id}).status_code == 403
    cross = client.post("/jobs/a1/pause", data={"csrf": csrf, "request_id": request_id},
                        headers={"origin": "https://evil.example"})
    assert cross.status_code == 403 and api.calls == []
    done = client.post("/jobs/a1/pause", data={"csrf": csrf, "request_id": request_id},
                       headers={"origin": BASE})
    assert done.status_code == 303 and api.calls == [("pause", request_id)]
    page = client.get(done.headers["location"])
    assert "paused" in page.text and request_id in page.text


def test_create_job_through_the_form(api: FakeApi) -> None:
    client = signed_in(api)
    form = client.get("/jobs/new")
    csrf = csrf_of(form.text)
    bad = client.post("/jobs", data={"csrf": csrf, "name": "x", "cron": "", "handler": "echo",
                                     "request_id": "req-bad"})
    assert bad.status_code == 400 and "spec.cron" in bad.text
    made = client.post("/jobs", data={"csrf": csrf, "name": "x", "cron": "* * * * *",
                                      "handler": "echo", "request_id": "req-1"})
    assert made.status_code == 303 and made.headers["location"].startswith("/jobs/j-req-1")
    assert api.jobs["j-req-1"].tenant == "alpha"


def test_run_page_and_cancel(api: FakeApi) -> None:
    client = signed_in(api)
    page = client.get("/runs/r1")
    assert "hello" in page.text and 'id="cancel"' in page.text
    answer = client.post("/runs/r1/cancel", data={"csrf": csrf_of(page.text),
                                                  "request_id": "req-c"})
    assert answer.status_code == 303 and api.runs["r1"].status == "cancelled"
    assert 'id="redrive"' not in client.get("/runs/r1").text, "only a dead letter"
    unknown = client.post("/runs/r1/explode", data={"csrf": csrf_of(page.text),
                                                    "request_id": "req-x"})
    assert unknown.status_code == 400 and "unknown action" in unknown.text


def test_a_dead_letter_is_redriven_from_its_page(api: FakeApi) -> None:
    api.runs["r1"] = replace(api.runs["r1"], status="dead_lettered")
    client = signed_in(api)
    page = client.get("/runs/r1")
    assert 'id="redrive"' in page.text and 'id="cancel"' not in page.text
    answer = client.post("/runs/r1/redrive", data={"csrf": csrf_of(page.text),
                                                   "request_id": "req-r"})
    assert answer.status_code == 303 and api.runs["r1"].status == "scheduled"
    assert ("redrive", "req-r") in api.calls
    assert "redrive: run r1 is scheduled" in client.get(answer.headers["location"]).text


def test_signing_out_ends_the_session(api: FakeApi) -> None:
    client = signed_in(api)
    cookie = client.cookies.get(SESSION_COOKIE)
    page = client.get("/jobs")
    client.post("/signout", data={"csrf": csrf_of(page.text)})
    again = client_for(api)
    again.cookies.set(SESSION_COOKIE, cookie or "")
    assert again.get("/jobs").status_code == 303


def test_open_mode_offers_a_tenant_picker(api: FakeApi) -> None:
    api.tokens = {}
    client = client_for(api)
    page = client.get("/signin")
    assert 'name="tenant"' in page.text and 'name="token"' not in page.text
    assert '<option value="beta">' in page.text
    answer = client.post("/signin", data={"csrf": csrf_of(page.text), "tenant": "alpha"})
    assert answer.status_code == 303
    jobs = client.get("/jobs")
    assert "beta-only" not in jobs.text and "open mode" in jobs.text
    assert client.get("/jobs/b1").status_code == 404


def test_overview_and_static_files(api: FakeApi) -> None:
    client = signed_in(api)
    client.get("/jobs")  # learns the tenant's name from its jobs
    page = client.get("/overview")
    assert page.status_code == 200 and "<svg" in page.text and "target 2 s" in page.text
    assert client.get("/static/console.js").status_code == 200
    assert client.get("/static/console.css").status_code == 200


def test_payload_output_and_errors_are_shown_as_text(api: FakeApi) -> None:
    from dataclasses import replace

    hostile = "<img src=x onerror=alert(1)>"
    api.jobs["a1"] = replace(api.jobs["a1"], payload=hostile.encode(), labels={"k": hostile})
    attempt = replace(api.runs["r1"].attempts[0], output=hostile.encode(), error=hostile,
                      progress=hostile.encode(), progress_at=NOW)
    api.runs["r1"] = replace(api.runs["r1"], attempts=(attempt,), reason=hostile)
    client = signed_in(api)
    for page in (client.get("/jobs/a1"), client.get("/runs/r1"), client.get("/jobs")):
        assert page.status_code == 200
        assert hostile not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text


def _hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, html
    return found.group(1)


def test_update_form_needs_csrf_and_refuses_a_stale_version(api: FakeApi) -> None:
    client = signed_in(api)
    form = client.get("/jobs/a1/edit")
    assert form.status_code == 200
    assert "&lt;script&gt;" in form.text and "<script>alert" not in form.text
    fields = {"csrf": csrf_of(form.text), "request_id": _hidden(form.text, "request_id"),
              "version": _hidden(form.text, "version"), "name": "renamed",
              "cron": "0 3 * * *", "handler": "echo", "time_zone": "UTC", "labels": "a=b"}
    assert fields["version"] == "1"
    assert client.post("/jobs/a1/update", data={**fields, "csrf": "wrong"}).status_code == 403
    cross = client.post("/jobs/a1/update", data=fields, headers={"origin": "https://evil.example"})
    assert cross.status_code == 403 and api.calls == []
    done = client.post("/jobs/a1/update", data=fields)
    assert done.status_code == 303 and api.calls == [("update", fields["request_id"])]
    page = client.get(done.headers["location"])
    assert "version 2" in page.text and fields["request_id"] in page.text
    assert api.jobs["a1"].name == "renamed" and api.jobs["a1"].labels == {"a": "b"}
    # The same form again: the job changed since it was filled. Shown again, saying so,
    # at the new version, with a new request id.
    stale = client.post("/jobs/a1/update", data={**fields, "request_id": "req-2"})
    assert stale.status_code == 409 and "changed since the form was filled" in stale.text
    now_at = _hidden(stale.text, "version")
    assert now_at == str(api.jobs["a1"].version) != fields["version"]
    assert _hidden(stale.text, "request_id") not in ("req-2", fields["request_id"])
    bad = client.post("/jobs/a1/update", data={**fields, "version": now_at,
                                                "cron": ""})
    assert bad.status_code == 400 and "spec.cron" in bad.text
    assert client.get("/jobs/b1/edit").status_code == 404


def test_backfill_form_needs_csrf_and_shows_the_outcome(api: FakeApi) -> None:
    client = signed_in(api)
    job_page = client.get("/jobs/a1")
    assert 'href="/jobs/a1/backfill"' in job_page.text and 'href="/jobs/a1/edit"' in job_page.text
    form = client.get("/jobs/a1/backfill")
    assert form.status_code == 200 and _hidden(form.text, "request_id") in form.text
    fields = {"csrf": csrf_of(form.text), "request_id": _hidden(form.text, "request_id"),
              "from": "2026-03-28T08:00", "until": "2026-03-28T11:00"}
    assert client.post("/jobs/a1/backfill", data={**fields, "csrf": ""}).status_code == 403
    assert api.calls == []
    done = client.post("/jobs/a1/backfill", data=fields)
    assert done.status_code == 303 and api.calls == [("backfill", fields["request_id"])]
    page = client.get(done.headers["location"])
    assert "backfill: 3 runs created" in page.text and fields["request_id"] in page.text
    bad = client.post("/jobs/a1/backfill", data={**fields, "from": "<b>soon</b>"})
    assert bad.status_code == 400 and "(field: from)" in bad.text
    assert "<b>soon</b>" not in bad.text
    assert client.post("/jobs/b1/backfill", data=fields).status_code == 404


def test_restore_form_needs_csrf_names_a_bad_version_and_shows_the_outcome(
        api: FakeApi) -> None:
    api.jobs["a1"] = replace(api.jobs["a1"], status="deleted", version=3)
    client = signed_in(api)
    assert 'href="/jobs/a1/restore"' in client.get("/jobs/a1").text
    form = client.get("/jobs/a1/restore")
    assert form.status_code == 200 and 'value="2"' in form.text, "the version before the last"
    fields = {"csrf": csrf_of(form.text), "request_id": _hidden(form.text, "request_id"),
              "version": "1", "skip_missed": "on"}
    assert client.post("/jobs/a1/restore", data={**fields, "csrf": ""}).status_code == 403
    assert api.calls == []
    bad = client.post("/jobs/a1/restore", data={**fields, "version": "<b>x</b>"})
    assert bad.status_code == 400 and "(field: version)" in bad.text
    assert "<b>x</b>" not in bad.text and api.calls == []
    too_far = client.post("/jobs/a1/restore", data={**fields, "version": "9"})
    assert too_far.status_code == 400 and "versions 1 to 3" in too_far.text
    done = client.post("/jobs/a1/restore", data=fields)
    assert done.status_code == 303
    assert api.calls == [("restore", fields["request_id"])] and api.skipped_missed
    page = client.get(done.headers["location"])
    assert "restored: job a1 is active at version 4" in page.text
    assert client.post("/jobs/b1/restore", data=fields).status_code == 404


def test_the_update_form_previews_the_change_against_the_last_week_before_it_is_sent(
        api: FakeApi) -> None:
    client = signed_in(api)
    form = client.get("/jobs/a1/edit")
    assert 'formaction="/jobs/a1/what-if"' in form.text
    fields = {"csrf": csrf_of(form.text), "request_id": _hidden(form.text, "request_id"),
              "version": _hidden(form.text, "version"), "name": "n", "handler": "echo",
              "queue": "default", "cron": "*/30 * * * *", "time_zone": "UTC"}
    assert client.post("/jobs/a1/what-if", data={**fields, "csrf": ""}).status_code == 403
    shown = client.post("/jobs/a1/what-if", data=fields)
    assert shown.status_code == 200 and api.calls == [("what-if", "*/30 * * * *")]
    assert 'id="what-if-proposed">336<' in shown.text and 'id="what-if-added">168<' in shown.text
    assert "DST on 2026-03-29 (+1:00)" in shown.text
    assert "<b>paused</b>" not in shown.text, "escaped"
    # Nothing was updated, the form keeps its values and its request id for the update.
    assert _hidden(shown.text, "request_id") == fields["request_id"]
    assert 'value="*/30 * * * *"' in shown.text
    refused = client.post("/jobs/a1/what-if", data={**fields, "cron": ""})
    assert refused.status_code == 400 and "(field: spec.cron)" in refused.text
    assert client.post("/jobs/b1/what-if", data=fields).status_code == 404


def test_the_workers_page_lists_the_live_workers_escaped(api: FakeApi) -> None:
    api.workers = [WorkerAnnouncement("w-<b>1</b>", "host-1", ("default",), ("echo", "backup"),
                                 16, 3, "1.0", NOW - timedelta(seconds=4))]
    page = signed_in(api).get("/workers")
    assert page.status_code == 200
    assert "w-&lt;b&gt;1&lt;/b&gt;" in page.text and "<b>1</b>" not in page.text
    assert "echo, backup" in page.text and "3 / 16" in page.text and "4 s ago" in page.text
    # A tenant is shown no host (the api leaves it out).
    assert "host-1" not in page.text
    api.workers = []
    assert "No live worker" in signed_in(api).get("/workers").text
