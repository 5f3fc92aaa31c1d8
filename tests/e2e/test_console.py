"""The console in a real browser (Debian's headless Chromium through its WebDriver) against
the whole service: sign in as tenant alpha, create a job through the page, see its runs,
open a run and its attempts, update and backfill it through their forms, pause it through
the confirmation page, and never see tenant beta's job. Screenshots of every page go to
.cronlog/test-output/console/; the jobs and job pages are copied to docs/console/ for the
README."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.conftest import ROOT
from tests.e2e.conftest import RunningService, free_port
from tests.support import polling
from tests.support.polling import T


def wait_for(probe: Callable[[], T | None], timeout: float, what: str,
             interval: float = 0.2) -> T:
    """polling.wait_for, where an element of the page the browser was leaving, or one the
    next page has not drawn yet (a click's navigation still under way), counts as not yet."""
    from selenium.common.exceptions import (
        NoSuchElementException,
        StaleElementReferenceException,
    )

    def settled() -> T | None:
        try:
            return probe()
        except (StaleElementReferenceException, NoSuchElementException):
            return None

    return polling.wait_for(settled, timeout, what, interval)

pytestmark = pytest.mark.e2e

ALPHA_TOKEN = "alpha-" + uuid.uuid4().hex
BETA_TOKEN = "beta-" + uuid.uuid4().hex
BETA_JOB_NAME = "beta-private-" + uuid.uuid4().hex[:6]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SHOTS = ROOT / ".cronlog" / "test-output" / "console"
README_SHOTS = ROOT / "docs" / "console"


SERVICE_ENV = {"CRONLOG_TENANT_TOKENS": f"alpha={ALPHA_TOKEN},beta={BETA_TOKEN}"}


@pytest.fixture(scope="module")
def console(service: RunningService) -> Iterator[str]:
    from cronlog.infra.config import Settings
    from cronlog_dev.processes import spawn_role, stop_all

    assert isinstance(service.settings, Settings)
    port = free_port()
    process = spawn_role("console", service.settings, service.log_dir,
                         {"CRONLOG_CONSOLE_ADDRESS": f"127.0.0.1:{port}",
                          "CRONLOG_TENANT_TOKENS": ""})
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert process.poll() is None, (service.log_dir / "console.log").read_text()
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    wait_for(healthy, 30, "the console answers /healthz")
    try:
        yield url
    finally:
        stop_all([process])


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: scripts/install-system-deps.sh installs "
                    "Debian's chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--lang=en-US"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def shoot(driver: object, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    return path


def test_a_tenant_steers_its_jobs_in_a_real_browser(service: RunningService, console: str,
                                                     browser: object) -> None:
    from selenium.webdriver.common.by import By

    driver: object = browser
    find = driver.find_element  # type: ignore[attr-defined]
    finds = driver.find_elements  # type: ignore[attr-defined]
    get = driver.get  # type: ignore[attr-defined]

    def source() -> str:
        return str(driver.page_source)  # type: ignore[attr-defined]

    stub = pb_grpc.JobServiceStub(service.channel)
    beta = (("authorization", f"Bearer {BETA_TOKEN}"),)
    beta_job = stub.CreateJob(pb.CreateJobRequest(request_id=str(uuid.uuid4()), spec=pb.JobSpec(
        name=BETA_JOB_NAME, handler="echo", cron="*/2 * * * * *")), timeout=30,
        metadata=beta).job

    # Sign in as alpha.
    get(console + "/jobs")
    assert "/signin" in driver.current_url  # type: ignore[attr-defined]
    find(By.ID, "token-input").send_keys(ALPHA_TOKEN)
    shoot(driver, "1-signin")
    find(By.ID, "signin").click()
    wait_for(lambda: "/jobs" in driver.current_url, 10,  # type: ignore[attr-defined]
             f"signed in ({source()[:2000]})")
    cookie = driver.get_cookie("cronlog_session")  # type: ignore[attr-defined]
    assert cookie and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert ALPHA_TOKEN not in cookie["value"]

    # Create a job through the form.
    get(console + "/jobs/new")
    name = "console-e2e-" + uuid.uuid4().hex[:6]
    find(By.ID, "name").send_keys(name)
    find(By.ID, "cron").send_keys("*/2 * * * * *")
    time_zone = find(By.ID, "time_zone")
    time_zone.clear()
    time_zone.send_keys("Europe/Berlin")
    find(By.ID, "labels").send_keys("team=console")
    shoot(driver, "2-new-job")
    find(By.ID, "create").click()
    wait_for(lambda: find(By.ID, "job-status").text == "active", 15, "the job page after create")
    job_url = str(driver.current_url).split("?")[0]  # type: ignore[attr-defined]
    job_id = job_url.rsplit("/", 1)[-1]
    assert len(find(By.CSS_SELECTOR, "#fire-times li").text) > 0
    assert len(finds(By.CSS_SELECTOR, "#fire-times li")) == 10

    # Its runs appear in the strip (the api reads them from the run history).
    def succeeded_runs() -> list[object]:
        get(job_url)
        return list(finds(By.CSS_SELECTOR, "#runs-strip a.run.succeeded"))

    # A few, so that the screenshot shows a strip.
    wait_for(lambda: len(succeeded_runs()) >= 4, 60, "succeeded runs in the job page's strip",
             interval=1.0)
    shoot(driver, "4-job")

    # The jobs table: alpha's job with its last run; beta's never.
    def listed() -> bool:
        get(console + "/jobs")
        rows = finds(By.CSS_SELECTOR, f'tr.job[data-job-id="{job_id}"]')
        return bool(rows) and "succeeded" in rows[0].text

    wait_for(listed, 30, "the job listed with its last run's outcome", interval=1.0)
    assert BETA_JOB_NAME not in source()
    shoot(driver, "3-jobs")

    # A run and its attempts.
    get(job_url)
    find(By.CSS_SELECTOR, "#runs-strip a.run.succeeded").click()
    wait_for(lambda: finds(By.CSS_SELECTOR, "#attempts tr.attempt"), 10, "the run's attempts")
    attempt = find(By.CSS_SELECTOR, "#attempts tr.attempt")
    assert "succeeded" in attempt.text
    assert find(By.ID, "run-status").text == "succeeded"
    shoot(driver, "5-run")

    # Update through the form: renamed, the other settings kept. The job fires while the
    # form is open (its event version moves, its version does not): no reason to refuse it.
    get(job_url)
    find(By.ID, "update").click()
    wait_for(lambda: finds(By.ID, "update-job"), 10, "the update form")
    version = int(find(By.ID, "job-version").text)
    alpha = (("authorization", f"Bearer {ALPHA_TOKEN}"),)

    def job_now() -> pb.Job:
        return stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10, metadata=alpha).job

    events_then = job_now().event_version
    wait_for(lambda: job_now().event_version > events_then, 15,
             "the job firing while the form is open", interval=0.5)
    assert job_now().version == version
    renamed = name + "-renamed"
    name_field = find(By.ID, "name")
    name_field.clear()
    name_field.send_keys(renamed)
    shoot(driver, "6-update")
    find(By.ID, "confirm").click()
    wait_for(lambda: renamed in find(By.TAG_NAME, "h1").text, 15, "the job page, renamed")
    assert find(By.ID, "done").text.startswith(f"updated: job {job_id}")
    updated = stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10, metadata=alpha).job
    assert updated.spec.name == renamed and updated.spec.time_zone == "Europe/Berlin"
    assert dict(updated.spec.labels) == {"team": "console"}

    # Backfill the 20 seconds before now: a run for each of their ten fire times.
    find(By.ID, "backfill").click()
    wait_for(lambda: finds(By.ID, "backfill-job"), 10, "the backfill form")
    until = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    for field_id, value in (("from", until - timedelta(seconds=20)), ("until", until)):
        field = find(By.ID, field_id)
        field.clear()
        field.send_keys(value.isoformat())
    backfill_id = find(By.CSS_SELECTOR, 'input[name="request_id"]').get_attribute("value")
    shoot(driver, "6-backfill")
    find(By.ID, "confirm").click()
    wait_for(lambda: finds(By.ID, "done"), 15, "the job page after the backfill")
    assert find(By.ID, "done").text.startswith("backfill: 10 runs created")
    assert find(By.ID, "request-id").text == backfill_id

    # Pause, through the confirmation page; the request id is shown before and after.
    get(job_url)
    find(By.ID, "pause").click()
    request_id = find(By.CSS_SELECTOR, 'input[name="request_id"]').get_attribute("value")
    assert request_id and request_id in source()
    shoot(driver, "6-confirm-pause")
    find(By.ID, "confirm").click()
    wait_for(lambda: find(By.ID, "job-status").text == "paused", 15, "the job shown paused")
    assert find(By.ID, "request-id").text == request_id
    shoot(driver, "7-paused")
    assert stub.GetJob(pb.GetJobRequest(job_id=job_id), timeout=10,
                       metadata=alpha).job.status == pb.JOB_STATUS_PAUSED

    # The audit timeline: the create and the pause, newest first, with the pause's request id.
    def timeline() -> list[str]:
        get(job_url)
        return [str(row.get_attribute("data-event"))
                for row in finds(By.CSS_SELECTOR, "#timeline tr.event")]

    wait_for(lambda: {"JobCreated", "JobPaused"} <= set(timeline()), 30,
             "created and paused in the job's audit timeline", interval=1.0)
    events = timeline()
    assert events.index("JobPaused") < events.index("JobCreated")
    assert "JobFireAdvanced" not in events
    assert request_id in find(By.ID, "timeline").text
    shoot(driver, "7-timeline")

    # Tenant beta's job is out of reach by its id too, and appears on no page.
    get(f"{console}/jobs/{beta_job.job_id}")
    assert "NOT_FOUND" in source() and BETA_JOB_NAME not in source()
    get(console + "/jobs?status=active")
    assert BETA_JOB_NAME not in source()
    get(console + "/overview")
    assert "<svg" in source() and BETA_JOB_NAME not in source()
    assert finds(By.CSS_SELECTOR, "#top-of-hour svg rect"), "the top-of-hour load drawn"
    shoot(driver, "8-overview")

    # The documentation's pictures are tracked: replaced only when asked, so a test run
    # leaves the checkout as it found it.
    if os.environ.get("CRONLOG_UPDATE_CONSOLE_SHOTS") == "1":
        README_SHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHOTS / "3-jobs.png", README_SHOTS / "jobs.png")
        shutil.copyfile(SHOTS / "4-job.png", README_SHOTS / "job.png")


def test_the_console_refuses_a_public_bind_without_consent(service: RunningService) -> None:
    from cronlog.infra.config import Settings
    from cronlog_dev.processes import settings_env

    assert isinstance(service.settings, Settings)
    answer = subprocess.run([sys.executable, "-m", "cronlog.infra.entrypoints.cli", "console"],
                            env={**os.environ, **settings_env(service.settings),
                                 "CRONLOG_CONSOLE_ADDRESS": "0.0.0.0:0"},
                            capture_output=True, text=True, timeout=60)
    assert answer.returncode != 0 and "CRONLOG_CONSOLE_REMOTE=1" in answer.stderr
