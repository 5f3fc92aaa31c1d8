"""The console's page logic against a fake api: filters, paging bounds, tenant scoping in
open mode, fire times with DST changes, runs and their output, actions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cronlog.console import pages
from cronlog.console.ports import ApiRefused, Credentials, JobQuery
from tests.support.console_api import NOW, FakeApi, FakeHistory, job, run

A = Credentials("tok-a", "")
B = Credentials("tok-b", "")
TOKENS = {"tok-a": "alpha", "tok-b": "beta"}


def api_with_jobs() -> FakeApi:
    api = FakeApi(TOKENS)
    api.jobs = {"a1": job("a1", name="nightly report", labels={"team": "data"}),
                "a2": job("a2", name="cleanup", status="paused", queue="batch"),
                "b1": job("b1", "beta", name="beta secret")}
    return api


def test_jobs_page_shows_only_the_callers_jobs_with_their_last_run() -> None:
    view = pages.jobs_view(api_with_jobs(), FakeHistory(), A, pages.JobFilter(), "", UTC)
    assert [r.job.job_id for r in view.rows] == ["a1", "a2"]
    assert view.rows[0].last_run is not None and view.rows[0].last_run.status == "failed"
    assert view.rows[0].words == "every 5 minutes"
    # The next fire time in the job's zone (Berlin, CET in March before the change) and ours.
    assert view.rows[0].next_fire is not None
    assert view.rows[0].next_fire.job_local.endswith("CET")
    assert view.rows[0].next_fire.viewer_local.endswith("UTC")


@pytest.mark.parametrize(("filters", "query", "expected"), [
    (pages.JobFilter(status="paused"), JobQuery(statuses=("paused",)), ["a2"]),
    (pages.JobFilter(queue="batch"), JobQuery(queue="batch"), ["a2"]),
    (pages.JobFilter(label="team=data"), JobQuery(labels=(("team", "data"),)), ["a1"]),
    (pages.JobFilter(label=" team "), JobQuery(labels=(("team", None),)), ["a1"]),
    (pages.JobFilter(label="team=ops"), JobQuery(labels=(("team", "ops"),)), []),
    (pages.JobFilter(label="team="), JobQuery(labels=(("team", ""),)), []),
    (pages.JobFilter(name="REPORT"), JobQuery(name_contains="REPORT"), ["a1"]),
])
def test_jobs_filters_go_to_the_api(filters: pages.JobFilter, query: JobQuery,
                                    expected: list[str]) -> None:
    api = api_with_jobs()
    view = pages.jobs_view(api, FakeHistory(), A, filters, "", UTC)
    assert api.last_query == query and api.list_calls == 1
    assert [r.job.job_id for r in view.rows] == expected


def test_a_filtered_page_is_one_api_call_and_follows_its_token() -> None:
    api = FakeApi(TOKENS)
    api.jobs = {f"j{i:03}": job(f"j{i:03}", queue="batch" if i % 2 else "default")
                for i in range(pages.PAGE_SIZE * 3)}
    filters = pages.JobFilter(queue="batch")
    first = pages.jobs_view(api, FakeHistory(), A, filters, "", UTC)
    assert api.list_calls == 1 and len(first.rows) == pages.PAGE_SIZE
    second = pages.jobs_view(api, FakeHistory(), A, filters, first.next_page_token, UTC)
    assert api.list_calls == 2 and len(second.rows) == pages.PAGE_SIZE // 2
    assert {r.job.queue for r in [*first.rows, *second.rows]} == {"batch"}
    assert not second.next_page_token


def test_a_filter_the_api_refuses_is_shown_with_its_field() -> None:
    view = pages.jobs_view(api_with_jobs(), FakeHistory(), A, pages.JobFilter(status="gone"),
                           "", UTC)
    assert view.rows == [] and "field: statuses" in view.refused


def test_unfiltered_paging_follows_the_api_token() -> None:
    api = FakeApi(TOKENS)
    api.jobs = {f"j{i:03}": job(f"j{i:03}") for i in range(pages.PAGE_SIZE + 5)}
    first = pages.jobs_view(api, FakeHistory(), A, pages.JobFilter(), "", UTC)
    second = pages.jobs_view(api, FakeHistory(), A, pages.JobFilter(), first.next_page_token, UTC)
    assert len(first.rows) == pages.PAGE_SIZE and len(second.rows) == 5
    assert not second.next_page_token


def test_without_history_the_jobs_page_still_shows_its_jobs() -> None:
    view = pages.jobs_view(api_with_jobs(), FakeHistory(available=False), A, pages.JobFilter(),
                           "", UTC)
    assert len(view.rows) == 2 and "unavailable" in view.history_note


def test_open_mode_scopes_to_the_picked_tenant() -> None:
    api = api_with_jobs()
    api.tokens = {}
    picked = Credentials(None, "alpha")
    view = pages.jobs_view(api, FakeHistory(), picked, pages.JobFilter(), "", UTC)
    assert {r.job.tenant for r in view.rows} == {"alpha"}
    with pytest.raises(ApiRefused) as refused:
        pages.job_view(api, FakeHistory(), picked, "b1", NOW, UTC)
    assert refused.value.code == "NOT_FOUND"
    with pytest.raises(ApiRefused):
        pages.job_action(api, picked, "pause", "b1", "req-1")
    assert api.jobs["b1"].status == "active"


def test_another_tenants_job_is_not_found_through_the_api() -> None:
    with pytest.raises(ApiRefused) as refused:
        pages.job_view(api_with_jobs(), FakeHistory(), A, "b1", NOW, UTC)
    assert refused.value.code == "NOT_FOUND"


def test_next_fire_times_mark_the_dst_change() -> None:
    berlin = pages.zone("Europe/Berlin")
    # Berlin goes from CET (+01:00) to CEST (+02:00) at 01:00 UTC on 29 March 2026.
    times = [datetime(2026, 3, 28, 23, 0, tzinfo=UTC), datetime(2026, 3, 29, 23, 0, tzinfo=UTC)]
    shown = pages.next_fire_times(times, berlin, UTC, NOW)
    assert shown[0].offset_change == ""
    assert shown[1].offset_change == "UTC+0100 → UTC+0200"


def test_job_page_has_preview_runs_and_charts() -> None:
    api = api_with_jobs()
    api.preview_times = [NOW + timedelta(minutes=5 * i) for i in range(1, 15)]
    api.runs = {"r1": run("r1", "a1"), "r2": run("r2", "a1", status="failed")}
    view = pages.job_view(api, FakeHistory(), A, "a1", NOW, UTC)
    assert len(view.fire_times) == pages.PREVIEW_COUNT
    assert [r.run_id for r in view.runs] == ["r2", "r1"]  # oldest first in the strip
    assert view.lag_chart is not None and view.lag_chart.target_y is not None


def test_a_paused_job_shows_no_fire_times() -> None:
    view = pages.job_view(api_with_jobs(), FakeHistory(), A, "a2", NOW, UTC)
    assert view.fire_times == [] and "paused" in view.preview_note


def test_run_output_is_bounded_and_decoded_as_text() -> None:
    api = api_with_jobs()
    big = b"<b>" + b"x" * (pages.OUTPUT_SHOWN + 10) + b"\xff"
    attempt = run("r1", "a1").attempts[0]
    from dataclasses import replace
    api.runs = {"r1": run("r1", "a1", status="running",
                          attempts=(replace(attempt, output=big, output_truncated=True),))}
    view = pages.run_view(api, A, "r1", UTC)
    shown = view.attempts[0]
    assert len(shown.output) == pages.OUTPUT_SHOWN and shown.output.startswith("<b>")
    assert shown.output_cut and shown.output_truncated and view.cancellable


def test_an_attempts_last_progress_is_shown_with_its_time() -> None:
    api = api_with_jobs()
    attempt = replace(run("r1", "a1").attempts[0], progress=b"3/10 \xff", progress_at=NOW)
    api.runs = {"r1": run("r1", "a1", status="running", attempts=(attempt,))}
    shown = pages.run_view(api, A, "r1", UTC).attempts[0]
    assert shown.progress == "3/10 \ufffd"
    assert shown.progressed is not None and shown.progressed.utc == NOW
    api.runs = {"r1": run("r1", "a1", status="running")}
    quiet = pages.run_view(api, A, "r1", UTC).attempts[0]
    assert (quiet.progress, quiet.progressed) == ("", None)


def test_actions_pass_the_request_id_and_report_it() -> None:
    api = api_with_jobs()
    done = pages.job_action(api, A, "pause", "a1", "req-7")
    assert api.calls == [("pause", "req-7")] and done.request_id == "req-7"
    assert done.message == "pause: job a1 is paused"
    triggered = pages.job_action(api, A, "trigger", "a1", "req-8")
    assert triggered.run is not None and triggered.message.startswith("triggered: run ")
    with pytest.raises(ApiRefused):
        pages.job_action(api, A, "explode", "a1", "req-9")


def test_create_job_reads_the_form_and_refuses_bad_labels() -> None:
    api = FakeApi(TOKENS)
    created = pages.create_job(api, A, {"name": "n", "cron": "* * * * *", "handler": "echo",
                                        "labels": "team=data, env=dev"}, "req-1")
    assert created.tenant == "alpha" and created.labels == {"team": "data", "env": "dev"}
    with pytest.raises(ApiRefused) as refused:
        pages.create_job(api, A, {"name": "n", "cron": "* * * * *", "labels": "oops"}, "req-2")
    assert refused.value.field_name == "spec.labels"
    assert api.calls == [("create", "req-1")]


def test_sign_in_checks_the_token_with_the_api() -> None:
    api = api_with_jobs()
    assert pages.sign_in_with_token(api, " tok-a ") == Credentials("tok-a", "alpha")
    with pytest.raises(ApiRefused) as refused:
        pages.sign_in_with_token(api, "guess")
    assert refused.value.code == "UNAUTHENTICATED"
    assert not pages.sign_in_view(api, FakeHistory()).open_mode
    api.tokens = {}
    assert pages.sign_in_view(api, FakeHistory()).tenants == ["alpha", "beta"]


def test_overview_reads_the_tenants_history() -> None:
    history = FakeHistory()
    view = pages.overview_view(history, "alpha", NOW)
    assert set(history.asked_tenants) == {"alpha"}
    assert view.runs_chart is not None and len(view.runs_chart.bars) == 3
    assert view.dead_letters == 2
    assert pages.overview_view(history, "", NOW).runs_chart is None


def test_update_applies_the_form_at_the_version_it_was_filled_from() -> None:
    api = api_with_jobs()
    form = {"name": "renamed", "cron": "0 3 * * *", "time_zone": "UTC", "handler": "echo",
            "queue": "", "payload": "p", "labels": "team=ops", "version": "7"}
    api.jobs["a1"] = replace(api.jobs["a1"], version=7)
    done = pages.update_job(api, A, "a1", form, "req-u")
    assert done.job is not None and done.job.name == "renamed"
    assert done.job.schedule == "0 3 * * *" and done.job.labels == {"team": "ops"}
    assert done.job.queue == "default" and done.job.payload == b"p"
    assert done.message == "updated: job a1 is at version 8"
    with pytest.raises(ApiRefused) as stale:
        pages.update_job(api, A, "a1", form, "req-v")  # filled at the version before
    assert stale.value.code == "FAILED_PRECONDITION"
    for shown in ("", "0", "-1", "x", "9" * 20):
        with pytest.raises(ApiRefused) as missing:
            pages.update_job(api, A, "a1", {**form, "version": shown}, "req-w")
        assert missing.value.field_name == "version"
    with pytest.raises(ApiRefused) as foreign:
        pages.update_job(api, A, "b1", form, "req-x")
    assert foreign.value.code == "NOT_FOUND"
    assert api.calls == [("update", "req-u")]
    assert pages.labels_text({"b": "2", "a": "1"}) == "a=1,b=2"


def test_update_of_a_job_without_cron_leaves_its_schedule() -> None:
    api = api_with_jobs()
    api.jobs["a3"] = job("a3", schedule="at 2026-04-01T00:00:00+00:00", schedule_kind="at")
    form = {"name": "n", "handler": "echo", "time_zone": "UTC", "version": "1"}
    done = pages.update_job(api, A, "a3", form, "req-a")
    assert done.job is not None and done.job.schedule == "at 2026-04-01T00:00:00+00:00"


def test_open_mode_updates_and_backfills_only_the_picked_tenants_jobs() -> None:
    api = api_with_jobs()
    api.tokens = {}
    picked = Credentials(None, "alpha")
    with pytest.raises(ApiRefused) as refused:
        pages.update_job(api, picked, "b1", {"name": "x", "version": "1"}, "r1")
    assert refused.value.code == "NOT_FOUND"
    with pytest.raises(ApiRefused):
        pages.backfill_job(api, picked, "b1", {"from": "2026-03-27T00:00",
                                               "until": "2026-03-27T02:00"}, "r2")
    with pytest.raises(ApiRefused):
        pages.job_of(api, picked, "b1")
    assert api.calls == []


def test_backfill_reads_iso_times_utc_by_default_and_names_a_bad_field() -> None:
    api = api_with_jobs()
    done = pages.backfill_job(api, A, "a1", {"from": "2026-03-27T00:00",
                                             "until": "2026-03-27T03:00+01:00"}, "req-b")
    assert api.backfilled == (datetime(2026, 3, 27, tzinfo=UTC),
                              datetime(2026, 3, 27, 2, tzinfo=UTC))
    assert len(done.created_runs) == 2 and done.message == "backfill: 2 runs created"
    for form, field_name in (({"from": "yesterday", "until": "2026-03-27T03:00"}, "from"),
                             ({"from": "2026-03-27T00:00", "until": ""}, "until")):
        with pytest.raises(ApiRefused) as refused:
            pages.backfill_job(api, A, "a1", form, "req-c")
        assert refused.value.code == "INVALID_ARGUMENT"
        assert refused.value.field_name == field_name
    assert api.calls == [("backfill", "req-b")]
