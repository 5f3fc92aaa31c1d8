"""The job page's "Alert deliveries" (issue 37): the job's newest attempts through the api
(as the signed-in tenant), shown escaped; a refusal is a note, not a broken page."""

from __future__ import annotations

from starlette.testclient import TestClient

from cronlog.console.ports import ApiRefused, Credentials, DeliveryLine
from cronlog.infra.console.app import Console, build_app
from tests.support.console_api import NOW, FakeApi, FakeHistory, job
from tests.support.console_web import BASE, csrf_of

LINE = DeliveryLine(sent_at=NOW, kind="dead_lettered", channel_name="ops-hook",
                    channel_kind="webhook", attempt=2, outcome="failed", status_code=410,
                    latency_ms=84, error="<b>gone</b>", digest_count=3)


def page_of(api: FakeApi) -> str:
    client = TestClient(build_app(Console(api, FakeHistory(), clock=lambda: NOW)),
                        base_url=BASE, follow_redirects=False)
    signin = client.get("/signin")
    client.post("/signin", data={"csrf": csrf_of(signin.text), "token": "tok-a"})
    page = client.get("/jobs/a1")
    assert page.status_code == 200, page.text
    return page.text


def fake() -> FakeApi:
    api = FakeApi({"tok-a": "alpha"})
    api.jobs = {"a1": job("a1")}
    return api


def test_the_jobs_attempts_are_shown_escaped() -> None:
    api = fake()
    api.deliveries = [("a1", LINE), ("other", LINE)]
    text = page_of(api)
    section = text[text.index('id="alert-deliveries"'):]
    assert section.count('class="delivery failed"') == 1
    for shown in ("ops-hook", "webhook", "dead_lettered", "digest of 3", "410", "84 ms"):
        assert shown in section
    assert "<b>gone</b>" not in text and "&lt;b&gt;gone&lt;/b&gt;" in section


def test_none_recorded_and_a_refusal_read_as_such() -> None:
    api = fake()
    assert "No alert deliveries recorded." in page_of(api)

    class Refusing(FakeApi):
        def list_alert_deliveries(self, who: Credentials, job_id: str,
                                  page_size: int) -> list[DeliveryLine]:
            raise ApiRefused("UNIMPLEMENTED", "an older api")

    refusing = Refusing({"tok-a": "alpha"})
    refusing.jobs = api.jobs
    assert "alert deliveries unavailable: an older api" in page_of(refusing)
