"""The job page's audit timeline and the overview's top-of-hour load, against a fake api and
history: newest first, folded requests, the api's tenant only, escaped; the bars of the
minutes of the hour."""

from __future__ import annotations

from datetime import timedelta

from starlette.testclient import TestClient

from cronlog.console import charts, pages
from cronlog.console.ports import Credentials, JobEventLine, MinuteOfHourLoad
from cronlog.infra.console.app import Console, build_app
from tests.support.console_api import NOW, FakeApi, FakeHistory, job
from tests.support.console_web import BASE, csrf_of

ALPHA = Credentials("tok-a", "alpha")


def line(version: int, event: str, request_id: str = "", summary: str = "") -> JobEventLine:
    return JobEventLine(NOW + timedelta(minutes=version), version, event, request_id,
                        f"request {request_id}" if request_id else "owner (schedule)", summary)


def history_with_events() -> FakeHistory:
    history = FakeHistory()
    history.timeline = [
        ("alpha", "a1", line(1, "JobCreated", "req-1", "next_fire_at=2026-01-01T00:00:00")),
        ("alpha", "a1", line(1, "JobRequestApplied", "req-1", "command=CreateJob")),
        ("alpha", "a1", line(4, "JobPaused", "req-2")),
        ("alpha", "a1", line(4, "JobRequestApplied", "req-2", "command=PauseJob")),
        # A trigger changes runs only: its JobRequestApplied is all the job's log says.
        ("alpha", "a1", line(3, "JobRequestApplied", "req-3", "command=TriggerJob")),
        ("alpha", "a1", line(5, "JobFireTimesMissed", "", "<b>reason</b>")),
        # The same job id under another tenant: never asked for, never shown.
        ("beta", "a1", line(9, "JobDeleted", "beta-secret")),
    ]
    return history


def api_with_job() -> FakeApi:
    api = FakeApi({"tok-a": "alpha", "tok-b": "beta"})
    api.jobs = {"a1": job("a1"), "b1": job("b1", "beta")}
    return api


def test_a_request_applied_folds_into_its_commands_event_and_stays_alone() -> None:
    events = [line(4, "JobRequestApplied", "req-2"), line(4, "JobPaused", "req-2"),
              line(3, "JobRequestApplied", "req-3"), line(2, "JobFireTimesMissed")]
    assert [(e.event, e.request_id) for e in pages.fold_requests(events)] == [
        ("JobPaused", "req-2"), ("JobRequestApplied", "req-3"), ("JobFireTimesMissed", "")]


def test_the_job_page_shows_the_jobs_events_newest_first_for_the_apis_tenant() -> None:
    history = history_with_events()
    view = pages.job_view(api_with_job(), history, ALPHA, "a1", NOW, pages.zone("UTC"))
    assert [(t.event.event, t.event.version) for t in view.timeline] == [
        ("JobFireTimesMissed", 5), ("JobPaused", 4), ("JobRequestApplied", 3),
        ("JobCreated", 1)]
    assert "beta" not in history.asked_tenants
    assert view.timeline[0].at is not None and view.timeline[0].at.viewer_local.startswith(
        (NOW + timedelta(minutes=5)).strftime("%Y-%m-%d %H:%M"))
    assert view.timeline_note == ""


def test_the_timeline_asks_for_a_bounded_number_of_events() -> None:
    history = FakeHistory()
    history.timeline = [("alpha", "a1", line(v, "JobUpdated", f"r{v}")) for v in range(1, 200)]
    view = pages.job_view(api_with_job(), history, ALPHA, "a1", NOW, pages.zone("UTC"))
    assert len(view.timeline) == pages.TIMELINE_ENTRIES
    assert view.timeline[0].event.version == 199


def test_the_job_page_says_when_the_timeline_cannot_be_read() -> None:
    view = pages.job_view(api_with_job(), FakeHistory(available=False), ALPHA, "a1", NOW,
                          pages.zone("UTC"))
    assert view.timeline == [] and view.timeline_note.startswith("audit timeline unavailable")


def signed_in(api: FakeApi, history: FakeHistory) -> TestClient:
    client = TestClient(build_app(Console(api, history, clock=lambda: NOW)), base_url=BASE,
                        follow_redirects=False)
    page = client.get("/signin")
    assert client.post("/signin", data={"csrf": csrf_of(page.text),
                                        "token": "tok-a"}).status_code == 303
    return client


def test_the_timeline_is_drawn_escaped_with_its_request_ids() -> None:
    client = signed_in(api_with_job(), history_with_events())
    page = client.get("/jobs/a1")
    assert page.status_code == 200
    assert 'id="timeline"' in page.text
    assert '<code class="request-id">req-2</code>' in page.text
    assert "&lt;b&gt;reason&lt;/b&gt;" in page.text and "<b>reason</b>" not in page.text
    assert "beta-secret" not in page.text
    # Newest first.
    assert page.text.index('data-event="JobPaused"') < page.text.index('data-event="JobCreated"')


def test_the_overview_draws_the_top_of_hour_load() -> None:
    client = signed_in(api_with_job(), FakeHistory())
    client.get("/jobs")  # names the session's tenant
    page = client.get("/overview")
    assert page.status_code == 200
    assert 'id="top-of-hour"' in page.text and ":00 120 runs, 5 an hour on average" in page.text


def test_minute_of_hour_bars_put_each_minute_in_its_slot() -> None:
    chart = charts.minute_of_hour_bars([MinuteOfHourLoad(0, 120, 5.0),
                                        MinuteOfHourLoad(30, 24, 1.0),
                                        MinuteOfHourLoad(59, 6, 1.0)])
    assert not chart.empty and chart.y_max == 200
    first, half, last = chart.bars
    slot = (charts.WIDTH - charts.PAD_LEFT) / 60
    assert first.x == round(charts.PAD_LEFT + 0.5, 1)
    assert half.x == round(charts.PAD_LEFT + 30 * slot + 0.5, 1)
    assert last.x + last.width <= charts.WIDTH
    assert first.height == 5 * half.height
    assert first.title == ":00 120 runs, 5 an hour on average"
    assert (chart.first_label, chart.last_label) == (":00", ":59")


def test_minute_of_hour_bars_without_runs_are_empty() -> None:
    assert charts.minute_of_hour_bars([]).empty
    assert charts.minute_of_hour_bars([MinuteOfHourLoad(61, 3, 3.0)]).empty


def test_the_overview_view_reads_a_day_of_load_for_its_tenant() -> None:
    history = FakeHistory()
    view = pages.overview_view(history, "alpha", NOW)
    assert view.top_of_hour is not None and len(view.top_of_hour.bars) == 2
    assert set(history.asked_tenants) == {"alpha"}
