"""A real Prometheus server (Debian's `prometheus`) scraping every role of a running service,
on the configuration `make run` writes (scrape jobs `cronlog-<role>`) and the shipped alert
rules: every role is up and exports its series, the rules load and evaluate, and after jobs
succeed, fail and dead-letter, the counts Prometheus reads agree with what ListRuns says.

Succeeded runs are compared with the scheduler's `cronlog_scheduler_runs_finished_total`:
it counts runs by their final status, once per committed cycle, as ListRuns does; the
worker's handler histogram counts attempts, at least once each (a redelivered dispatch runs
again), so it is checked against the attempts, not the runs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.prometheus_config import RULES_FILE, prometheus_config, scrape_job
from cronlog_dev.run_plan import metrics_setting
from tests.e2e.conftest import RunningService, free_port, rid, start_service, stop_service
from tests.support.polling import TimedOut, wait_for

pytestmark = pytest.mark.e2e

ROLES = ("api", "scheduler", "worker", "projector")
# A series of each role's own (catalogue.py): the api's once it has answered a call.
ROLE_SERIES = {"api": "cronlog_api_request_duration_seconds_count",
               "scheduler": "cronlog_scheduler_owned_partitions",
               "worker": "cronlog_worker_free_slots",
               "projector": "cronlog_projector_lag_messages"}
SCRAPE_SECONDS = 1.0


class Prometheus:
    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    def get(self, path: str, **params: str) -> dict[str, object]:
        assert self.process.poll() is None, f"prometheus exited: {self.log.read_text()}"
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(self.url + path + query, timeout=5) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]  # type: ignore[no-any-return]

    def query(self, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query's vector: each series' labels (sorted) -> value."""
        data = self.get("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return {tuple(sorted(item["metric"].items())): float(item["value"][1])
                for item in data["result"]}  # type: ignore[attr-defined]

    def value(self, expr: str) -> float | None:
        """The value of a query that gives one series (a sum); None while it gives none."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return next(iter(result.values()), None)


def prometheus_binary() -> str | None:
    return shutil.which("prometheus") or next(
        (p for p in ("/usr/bin/prometheus",) if Path(p).is_file()), None)


@pytest.fixture(scope="module")
def service(stack_settings: object) -> Iterator[tuple[RunningService, dict[str, int]]]:
    ports = {role: free_port() for role in ROLES}
    running = start_service(stack_settings, "test_prometheus", extra_env={
        metrics_setting(role): str(port) for role, port in ports.items()})
    try:
        yield running, ports
    finally:
        stop_service(running)


@pytest.fixture(scope="module")
def prometheus(service: tuple[RunningService, dict[str, int]],
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    binary = prometheus_binary()
    if binary is None:
        message = ("PROMETHEUS NOT FOUND: the Prometheus e2e test did not run. Install Debian's "
                   "`prometheus` package (scripts/install-system-deps.sh does).")
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    running, ports = service
    home = tmp_path_factory.mktemp("prometheus")
    config = home / "prometheus.yml"
    config.write_text(prometheus_config({role: f"127.0.0.1:{port}"
                                         for role, port in ports.items()},
                                        interval_seconds=SCRAPE_SECONDS))
    port = free_port()
    log = running.log_dir / "prometheus.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=out, stderr=subprocess.STDOUT)
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)

    def ready() -> bool:
        assert process.poll() is None, f"prometheus exited: {log.read_text()}"
        try:
            with urllib.request.urlopen(server.url + "/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    try:
        wait_for(ready, 30, "prometheus ready")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def settles(prometheus: Prometheus, expr: str, expected: float, what: str) -> None:
    """Waits (a few scrapes) for the query to read `expected`; says what it read if not."""
    try:
        wait_for(lambda: prometheus.value(expr) == expected, 30, what)
    except TimedOut:
        raise AssertionError(f"{what}: {expr} reads {prometheus.value(expr)}, "
                             f"expected {expected}") from None


def shipped_alerts() -> set[str]:
    return set(re.findall(r"^\s*- alert: (\w+)", RULES_FILE.read_text(), re.MULTILINE))


@pytest.mark.parametrize("role", ROLES)
def test_every_role_is_scraped_and_exports_its_series(
        service: tuple[RunningService, dict[str, int]], prometheus: Prometheus,
        role: str) -> None:
    job = scrape_job(role)
    if role == "api":
        # The api's request series exist once it has answered a JobService call.
        pb_grpc.JobServiceStub(service[0].channel).ListRuns(
            pb.ListRunsRequest(tenant="nobody-" + uuid.uuid4().hex[:6]), timeout=30)
    wait_for(lambda: prometheus.value(f'up{{job="{job}"}}') == 1, 30, f"{job} up")
    wait_for(lambda: prometheus.value(f'cronlog_ready{{job="{job}",role="{role}"}}') == 1, 60,
             f"{job} ready")
    assert prometheus.value(f'process_resident_memory_bytes{{job="{job}"}}'), job
    wait_for(lambda: prometheus.query(f'{ROLE_SERIES[role]}{{job="{job}"}}'), 30,
             f"{ROLE_SERIES[role]} from {job}")
    # Every role's Kafka clients report their statistics (every 5 s).
    wait_for(lambda: prometheus.query(f'cronlog_kafka_brokers_up{{job="{job}"}} >= 1'), 30,
             f"{job}'s Kafka statistics")


def test_the_shipped_rules_load_and_evaluate(prometheus: Prometheus) -> None:
    def evaluated() -> list[dict[str, object]] | None:
        groups = prometheus.get("/api/v1/rules")["groups"]
        rules = [rule for group in groups for rule in group["rules"]  # type: ignore[attr-defined]
                 if group["file"] == str(RULES_FILE)]
        # "unknown" until the first evaluation; "err" is an expression Prometheus refuses.
        return rules if rules and all(r["health"] != "unknown" for r in rules) else None

    rules = wait_for(evaluated, 30, "the shipped rules evaluated")
    assert {r["name"] for r in rules} == shipped_alerts()
    assert [r for r in rules if r["health"] != "ok"] == []


def finished_runs(stub: pb_grpc.JobServiceStub, tenant: str, expected: int) -> list[pb.Run]:
    terminal = {pb.RUN_STATUS_SUCCEEDED, pb.RUN_STATUS_FAILED, pb.RUN_STATUS_DEAD_LETTERED}

    def done() -> list[pb.Run] | None:
        runs = list(stub.ListRuns(pb.ListRunsRequest(tenant=tenant, page_size=1000),
                                  timeout=30).runs)
        return runs if len(runs) == expected and all(r.status in terminal for r in runs) \
            else None

    return wait_for(done, 90, f"{expected} runs ended in ListRuns")


def test_counts_in_prometheus_agree_with_list_runs(
        service: tuple[RunningService, dict[str, int]], prometheus: Prometheus) -> None:
    running, _ = service
    stub = pb_grpc.JobServiceStub(running.channel)
    tenant = "prom-" + uuid.uuid4().hex[:6]

    def job(name: str, handler: str, payload: bytes = b"") -> str:
        spec = pb.JobSpec(name=name, tenant=tenant, handler=handler, payload=payload,
                          cron="0 0 1 1 *", retry_policy=pb.RetryPolicy(max_attempts=2))
        spec.retry_policy.initial_backoff.FromMilliseconds(100)
        return str(stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec),
                                  timeout=30).job.job_id)

    def trigger(job_id: str) -> None:
        stub.TriggerJob(pb.TriggerJobRequest(request_id=rid(), job_id=job_id), timeout=30)

    echo = job("echo", "echo", b"hi")
    flaky = job("flaky", "fail", b'{"times": 1}')   # fails once, then succeeds
    doomed = job("doomed", "fail", b'{"times": 5}')  # out of its two attempts: dead letter
    for job_id in (echo, echo, echo, flaky, flaky, doomed):
        trigger(job_id)

    runs = finished_runs(stub, tenant, 6)
    by_status = Counter(r.status for r in runs)
    assert by_status == {pb.RUN_STATUS_SUCCEEDED: 5, pb.RUN_STATUS_DEAD_LETTERED: 1}, by_status
    attempts = Counter()  # type: Counter[int]
    for r in runs:
        attempts.update(a.status for a in stub.GetRun(pb.GetRunRequest(run_id=r.run_id),
                                                      timeout=30).run.attempts)
    assert attempts == {pb.ATTEMPT_STATUS_SUCCEEDED: 5, pb.ATTEMPT_STATUS_FAILED: 4}, attempts

    scheduler = 'job="cronlog-scheduler"'

    # The service is this module's own: every run it has is one of these.
    succeeded = by_status[pb.RUN_STATUS_SUCCEEDED]
    settles(prometheus,
            f'sum(cronlog_scheduler_runs_finished_total{{{scheduler},status="succeeded"}})',
            succeeded, "the scheduler's succeeded runs, as ListRuns counts them")
    settles(prometheus, f"sum(cronlog_scheduler_runs_dead_lettered_total{{{scheduler}}})",
            by_status[pb.RUN_STATUS_DEAD_LETTERED], "the dead letter counted")
    assert prometheus.value(
        f"sum(cronlog_scheduler_runs_created_total{{{scheduler},queue=\"default\"}})") == 6
    # A run out of retries ends with RunFailed: ListRuns' DEAD_LETTERED is the counter's
    # status "failed".
    assert prometheus.value(
        f'sum(cronlog_scheduler_runs_finished_total{{{scheduler},status="failed"}})') == \
        by_status[pb.RUN_STATUS_DEAD_LETTERED]

    # The worker counts attempts, at least once each.
    def handled(outcome: str) -> float:
        return prometheus.value(
            f'sum(cronlog_worker_handler_duration_seconds_count{{job="cronlog-worker",'
            f'outcome="{outcome}"}})') or 0.0

    wait_for(lambda: handled("succeeded") >= attempts[pb.ATTEMPT_STATUS_SUCCEEDED], 30,
             "the worker's succeeded attempts")
    wait_for(lambda: handled("failed") >= attempts[pb.ATTEMPT_STATUS_FAILED], 30,
             "the worker's failed attempts")
    # ListRuns reads the history, so the projector has applied every run's end (a succeeded
    # attempt ends its run: no RunSucceeded follows it any more).
    settles(prometheus, 'sum(cronlog_projector_events_applied_total{job="cronlog-projector",'
            'event="AttemptSucceeded"})', succeeded, "the projector's AttemptSucceeded events")
    assert prometheus.value('sum(cronlog_api_requests_total{job="cronlog-api",'
                            'method="TriggerJob",code="OK"})') == 6

    # A second dead letter, once Prometheus holds the first: the shipped alert fires on it.
    trigger(doomed)
    finished_runs(stub, tenant, 7)

    def dead_letter_alert() -> bool:
        # Prometheus's JSON: a list of alerts, each with its labels and state.
        alerts = cast("list[dict[str, Any]]", prometheus.get("/api/v1/alerts")["alerts"])
        return any(a["labels"]["alertname"] == "CronlogDeadLetters"
                   and a["labels"]["queue"] == "default" and a["state"] == "firing"
                   for a in alerts)

    wait_for(dead_letter_alert, 30, "CronlogDeadLetters firing for queue default")
