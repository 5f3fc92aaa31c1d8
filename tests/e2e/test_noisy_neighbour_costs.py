"""The noisy-neighbour suite's expensive-but-valid attacks (issue 33, DESIGN invariant 12):
one service with tenant tokens and a console, tenant A's every-second canary running
throughout, and tenant B trying each attack of the issue in a window of its own, one after
another:

- a foreign queue and handler: B aims its jobs at A's declared queue and handler (refused);
- never-firing batches: CreateJobs of 1,000 `0 0 31 2 *`, again and again (each item
  refused at the door, the batches throttled by B's command bucket);
- heavy previews in parallel: 1,000 fire times of a daily schedule past 541 excluded days
  (B's read bucket and thread share throttle them);
- the schedule-search bomb through CreateJobs: 1,000 jobs `1W,...,31W * */7,5#5` in
  America/New_York on a calendar of the Fridays on the 29th-31st up to 2099;
- the same bomb through UpdateCalendar: every follower searches again;
- ListJobs of fat rows (256 KiB payloads, 1,000 excluded days each) in parallel;
- the worker-slot hog: eight every-second jobs sleeping an hour each in the shared queue;
- heavy console pages in parallel: forty overview pages over B's million runs;
- a sign-in flood on the console with B's token;
- one tenant with 6,000 every-minute jobs under the default limits.

After each window A's canary is checked (tests/support/canary.py): every fire time of the
window ran once on its first attempt, start lag p99 within 2 s, and A's own api calls
(GetJob, ListRuns, CreateJob, timed from a process of their own) answered OK within 500 ms
p99. No process exits. The service runs with the default budgets (api rates, slots and
shares, console limits); only the queues and handlers are declared for A."""

from __future__ import annotations

import http.client
import itertools
import re
import secrets
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlencode

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from tests.e2e.conftest import RunningService, free_port, start_service, stop_service
from tests.support.canary import Canary
from tests.support.polling import wait_for

# Asserts timing: make test runs it alone (scripts/test-suites.sh).
pytestmark = [pytest.mark.e2e, pytest.mark.measured]

A_TOKEN, B_TOKEN = "a-" + uuid.uuid4().hex, "b-" + uuid.uuid4().hex
B = (("authorization", f"Bearer {B_TOKEN}"),)
A_QUEUE, A_HANDLER = "a-private", "a.reports:run"
# The bomb: a search of decades for every next fire time before issue 33.
BOMB = "0 0 " + ",".join(f"{d}W" for d in range(1, 32)) + " * */7,5#5"
FRIDAYS = [d.isoformat() for d in (date(2026, 1, 1) + timedelta(days=n) for n in range(27000))
           if d <= date(2099, 12, 31) and d.weekday() == 4 and d.day >= 29]
BOMB_JOBS = 1000
# Tenant A's CreateJob while B's batch of 1,000 bombs is decided, cycle by cycle, within B's
# share. It was over the 500 ms bound in every run (0.6-1.4 s) until 8 December 2026: A's
# command waited behind a worker report held back by B's deferred commands (a report used to
# hold back its whole inbox partition), behind B's long cycles, and behind a poll decoding
# twenty of B's batches at once. Now about 0.3-0.5 s on a 2-core machine, still over the
# bound in some runs, the rest of the tail being Kafka's two transactional hops and B's
# cycles on a busy machine. So still checked apart (an expected failure when over). GetJob and
# ListRuns, the start lags and every fire time stay asserted.
BOMB_BATCH_DEFECT = ("A's command waits for B's cycles and two read_committed Kafka hops on "
                     "a busy machine (about 0.3-0.5 s since 8 December 2026)")
# The same through a calendar: A's command waits behind the cycles in which B's 2,000
# followers apply the calendar's new version (A's CreateJob p99 560 ms, worst 1.6 s, in one
# of four runs on a slow 2-core machine before 8 December 2026; 0.23-0.36 s in five runs
# after, so under the bound, but checked apart as above on a slower machine).
FOLLOWERS_DEFECT = ("A's command waits behind cycles in which B's followers apply the "
                    "calendar's new version")
# Every other day from a week ahead: 541 excluded days a preview of 1,000 daily fire times
# walks past (0.8 s a call before issue 33).
PREVIEW_EXCLUSIONS = [(date.today() + timedelta(days=7 + 2 * n)).isoformat()
                      for n in range(541)]
# Fat rows: each job's spec near its limits (256 KiB of payload that does not compress, and
# 1,000 excluded days); 200 of them are 17 pages of 3 MiB.
FAT_JOBS = 200
FAT_PAYLOAD = 256 * 1024
FAT_EXCLUSIONS = [(date(2030, 1, 2) + timedelta(days=2 * n)).isoformat() for n in range(1000)]
PAGE_BYTES = 3 * 1024 * 1024
SLOTS, HOG_JOBS = 16, 8
HEAVY_RUNS = 1_000_000
CONSOLE_PAGE_SECONDS = 5.0  # the default page limit (CRONLOG_CONSOLE_PAGE_SECONDS)
WINDOW = 15.0


@dataclass
class Suite:
    service: RunningService
    console: str
    console_process: Any
    stub: pb_grpc.JobServiceStub
    canary: Canary

    def alive(self) -> None:
        """No process of the service, nor the console, has exited."""
        for role, process in {**self.service.processes, "console": self.console_process}.items():
            assert process.poll() is None, f"{role} exited; see {self.service.log_dir}"

    def check(self, window: Any, known_slow: dict[str, str] | None = None) -> None:
        self.alive()
        try:
            self.canary.check(self.stub, window, known_slow)
        finally:
            self.alive()


@pytest.fixture(scope="module")
def suite(stack_settings: object) -> Iterator[Suite]:
    from cronlog.infra.config import Settings
    from cronlog_dev.processes import spawn_role, stop_all

    running = start_service(
        stack_settings, "test_noisy_neighbour_costs",
        extra_env={"CRONLOG_TENANT_TOKENS": f"a={A_TOKEN},b={B_TOKEN}"},
        queues=("default", A_QUEUE), tenant_queues={"a": ("default", A_QUEUE)},
        tenant_handlers={"a": ("echo", A_HANDLER)})
    assert isinstance(running.settings, Settings)
    port = free_port()
    console_process = spawn_role("console", running.settings, running.log_dir,
                                 {"CRONLOG_CONSOLE_ADDRESS": f"127.0.0.1:{port}",
                                  "CRONLOG_TENANT_TOKENS": ""})
    console = f"127.0.0.1:{port}"
    canary = Canary(running.address, A_TOKEN)

    def healthy() -> bool:
        assert console_process.poll() is None, (running.log_dir / "console.log").read_text()
        try:
            return console_get(console, "/healthz", "")[0] == 200
        except OSError:
            return False

    try:
        wait_for(healthy, 30, "the console answers /healthz")
        stub = pb_grpc.JobServiceStub(running.channel)
        canary.start(stub)
        yield Suite(running, console, console_process, stub, canary)
        print("\n" + "\n".join(r.line() for r in canary.reports))
    finally:
        canary.stop()
        stop_all([console_process])
        stop_service(running)


def rid() -> str:
    return str(uuid.uuid4())


def code_of(error: grpc.RpcError) -> str:
    return str(error.code().name)


def hammer(seconds: float, threads: int, calls_per_s: float,
           call: Callable[[], str]) -> Counter[str]:
    """`call` from `threads` threads, each at most `calls_per_s` a second, for `seconds`;
    counts what it returned, or the status code it raised. Paced: this machine's two cores
    run the attacker and the service alike, and raw volume is for a load balancer's limits,
    not a tenant's budget (tests/e2e/test_api_budget.py, flood)."""
    stop = threading.Event()
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def loop() -> None:
        next_call = time.monotonic()
        while not stop.is_set():
            try:
                outcome = call()
            except grpc.RpcError as exc:
                outcome = code_of(exc)
            except Exception as exc:  # counted, so that the test names it
                outcome = f"unexpected {exc!r:.300}"
            with lock:
                counts[outcome] += 1
            next_call = max(next_call + 1 / calls_per_s, time.monotonic() - 1)
            stop.wait(max(0.0, next_call - time.monotonic()))

    workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    stop.wait(seconds)
    stop.set()
    for worker in workers:
        worker.join(60)
    return counts


def served(call: Callable[[], Any], what: str) -> Any:
    """B's setup calls, as a well-behaved client makes them: again after RESOURCE_EXHAUSTED."""
    def attempt() -> Any:
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                raise
            return None

    return wait_for(attempt, 60, what, interval=0.5)


def create_b(stub: pb_grpc.JobServiceStub, **fields: Any) -> pb.Job:
    spec = pb.JobSpec(**{"name": "job", "handler": "echo", "cron": "0 0 1 1 *", **fields})
    job: pb.Job = served(lambda: stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=spec),
                                         timeout=30, metadata=B).job, "B's CreateJob")
    return job


# The console over plain HTTP, as a browser would use it.

def console_get(address: str, path: str, session: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection(address, timeout=30)
    try:
        headers = {"Cookie": f"cronlog_session={session}"} if session else {}
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read().decode(errors="replace")
    finally:
        connection.close()


@dataclass(frozen=True)
class SignInForm:
    csrf: str


def sign_in_form(address: str) -> SignInForm:
    connection = http.client.HTTPConnection(address, timeout=30)
    try:
        connection.request("GET", "/signin")
        answer = connection.getresponse()
        page = answer.read().decode()
        assert answer.status == 200, page
        cookie = re.search(r"cronlog_signin_csrf=([^;]+)", answer.getheader("set-cookie") or "")
        assert cookie, answer.getheaders()
        return SignInForm(cookie.group(1))
    finally:
        connection.close()


def sign_in(address: str, form: SignInForm, token: str) -> tuple[int, str]:
    """POSTs the sign-in form; (status, the session cookie's value or '')."""
    connection = http.client.HTTPConnection(address, timeout=30)
    try:
        body = urlencode({"csrf": form.csrf, "token": token})
        connection.request("POST", "/signin", body=body, headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Cookie": f"cronlog_signin_csrf={form.csrf}"})
        answer = connection.getresponse()
        answer.read()
        found = re.search(r"cronlog_session=([^;]+)", answer.getheader("set-cookie") or "")
        return answer.status, found.group(1) if found else ""
    finally:
        connection.close()


def signed_in(address: str, token: str) -> str:
    status, session = sign_in(address, sign_in_form(address), token)
    assert status == 303 and session, status
    assert console_get(address, "/jobs", session)[0] == 200  # learns its tenant's name
    return session


class PageTimer:
    """Tenant A opening its overview once a second in a thread while B attacks the
    console: each page's status and seconds."""

    def __init__(self, address: str, session: str) -> None:
        self.address, self.session = address, session
        self.pages: list[tuple[int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            began = time.perf_counter()
            status, _ = console_get(self.address, "/overview", self.session)
            self.pages.append((status, time.perf_counter() - began))
            self._stop.wait(1.0)

    def __enter__(self) -> PageTimer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def check(self, what: str) -> None:
        times = [seconds for _, seconds in self.pages]
        print(f"\nA's overview during {what}: {len(times)} pages, median "
              f"{statistics.median(times):.2f} s, worst {max(times):.2f} s")
        assert self.pages and all(status == 200 for status, _ in self.pages), self.pages
        assert max(times) < CONSOLE_PAGE_SECONDS, self.pages


# The attacks, in order: each a window of its own, checked against A's canary.

def test_a_foreign_queue_and_handler_are_refused(suite: Suite) -> None:
    stub = suite.stub

    turns = itertools.count()

    def aim() -> str:
        n = next(turns)
        field = ("queue", "handler")[n % 2]
        aimed: dict[str, Any] = {"name": "foreign", "handler": "echo", "cron": "* * * * * *",
                                 field: {"queue": A_QUEUE, "handler": A_HANDLER}[field]}
        if n % 5 == 4:
            results = stub.CreateJobs(pb.CreateJobsRequest(items=[
                pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(**aimed))
                for _ in range(10)]), timeout=30, metadata=B).results
            fields = {r.error.field.split(".", 1)[1] for r in results if not r.HasField("job")}
            assert len(fields) == 1 and all(not r.HasField("job") for r in results), results
            return f"batch refused {fields.pop()}"
        try:
            stub.CreateJob(pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(**aimed)),
                           timeout=30, metadata=B)
        except grpc.RpcError as exc:
            named = [str(m.value) for m in exc.trailing_metadata() or ()
                     if m.key == "cronlog-field"]
            return f"{code_of(exc)} {''.join(named)}"
        return "served"

    with suite.canary.window("a foreign queue and handler") as window:
        counts = hammer(WINDOW, 2, 5.0, aim)
    print(f"\nB aiming at A's queue and handler: {dict(counts)}")
    assert counts and set(counts) <= {"INVALID_ARGUMENT spec.queue",
                                      "INVALID_ARGUMENT spec.handler",
                                      "batch refused spec.queue", "batch refused spec.handler",
                                      "RESOURCE_EXHAUSTED"}, counts
    suite.check(window)


def test_never_firing_batches_are_refused_and_throttled(suite: Suite) -> None:
    stub = suite.stub

    def batch() -> str:
        results = stub.CreateJobs(pb.CreateJobsRequest(items=[
            pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(
                name=f"never-{i}", handler="echo", cron="0 0 31 2 *")) for i in range(1000)]),
            timeout=60, metadata=B).results
        assert all(not r.HasField("job") and r.error.field.endswith("spec.schedule.cron")
                   for r in results), [r.error for r in results[:3]]
        return "every item refused"

    with suite.canary.window("never-firing batches") as window:
        counts = hammer(WINDOW, 2, 4.0, batch)
    print(f"\nB's never-firing batches of 1,000: {dict(counts)}")
    assert set(counts) <= {"every item refused", "RESOURCE_EXHAUSTED"}, counts
    # Its command bucket (5,000 a burst, 500 a second) serves a batch every 2 s after the
    # first five; the rest are refused before any item is looked at.
    assert counts["every item refused"] and counts["RESOURCE_EXHAUSTED"], counts
    suite.check(window)


def test_heavy_previews_in_parallel_are_throttled(suite: Suite) -> None:
    stub = suite.stub
    request = pb.PreviewScheduleRequest(cron="0 0 * * *", time_zone="America/New_York",
                                        count=1000, exclusions=PREVIEW_EXCLUSIONS)

    def preview() -> str:
        fire_times = stub.PreviewSchedule(request, timeout=30, metadata=B).fire_times
        assert len(fire_times) == 1000
        return "served"

    with suite.canary.window("heavy previews in parallel") as window:
        counts = hammer(WINDOW, 24, 8.0, preview)
    print(f"\nB's heavy previews from 24 threads: {dict(counts)}")
    suite.check(window)
    assert set(counts) <= {"served", "RESOURCE_EXHAUSTED"}, counts
    assert counts["served"] and counts["RESOURCE_EXHAUSTED"], counts


def test_the_schedule_search_bomb_through_create_jobs(suite: Suite) -> None:
    stub = suite.stub
    calendar = served(lambda: stub.CreateCalendar(pb.CreateCalendarRequest(
        request_id=rid(), name="fridays", exclusions=FRIDAYS), timeout=30, metadata=B),
        "B's calendar").calendar
    assert calendar.version == 1
    items = [pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(
        name=f"bomb-{i}", handler="echo", cron=BOMB, time_zone="America/New_York",
        calendar="fridays")) for i in range(BOMB_JOBS)]
    with suite.canary.window("the search bomb through CreateJobs") as window:
        results = served(lambda: stub.CreateJobs(pb.CreateJobsRequest(items=items),
                                                 timeout=120, metadata=B),
                         "B's CreateJobs of the bomb").results
        assert [r.WhichOneof("outcome") for r in results] == ["job"] * BOMB_JOBS, [
            r.error for r in results if r.WhichOneof("outcome") != "job"][:3]
        wait_for(lambda: stub.GetCalendar(pb.GetCalendarRequest(name="fridays"), timeout=30,
                                          metadata=B).calendar.jobs == BOMB_JOBS,
                 120, "the calendar's 1,000 followers")
    suite.check(window, known_slow={"CreateJob": BOMB_BATCH_DEFECT})


def test_the_schedule_search_bomb_through_update_calendar(suite: Suite) -> None:
    stub = suite.stub

    def followers_on(version: int) -> bool:
        # Pages of 3 MiB: each job's row carries the calendar's 309 days as applied.
        versions: list[int] = []
        token = ""
        while True:
            try:
                page = stub.ListJobs(pb.ListJobsRequest(name_contains="bomb-", page_size=1000,
                                                        page_token=token),
                                     timeout=30, metadata=B)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    return False
                raise
            versions += [j.calendar.version for j in page.jobs]
            token = page.next_page_token
            if not token:
                return len(versions) == BOMB_JOBS and set(versions) == {version}

    with suite.canary.window("the search bomb through UpdateCalendar") as window:
        updated = served(lambda: stub.UpdateCalendar(pb.UpdateCalendarRequest(
            request_id=rid(), name="fridays", expected_version=1,
            exclusions=[*FRIDAYS, "2026-12-25"]), timeout=30, metadata=B),
            "B's UpdateCalendar").calendar
        assert updated.version == 2
        wait_for(lambda: followers_on(2), 120, "every follower on version 2", interval=1.0)
    suite.check(window, known_slow={"CreateJob": FOLLOWERS_DEFECT})


def test_list_jobs_of_fat_rows_in_parallel(suite: Suite) -> None:
    stub = suite.stub

    def create_fat(first: int) -> None:
        for i in range(first, FAT_JOBS, 4):
            create_b(stub, name=f"fat-{i}", payload=secrets.token_bytes(FAT_PAYLOAD),
                     exclusions=FAT_EXCLUSIONS)

    threads = [threading.Thread(target=create_fat, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    largest = {"bytes": 0}

    def page_of(token: str) -> pb.ListJobsResponse:
        page = stub.ListJobs(pb.ListJobsRequest(name_contains="fat-", page_size=1000,
                                                page_token=token), timeout=30, metadata=B)
        largest["bytes"] = max(largest["bytes"], page.ByteSize())
        return page

    # Every fat job listed once, as a well-behaved client pages (B's reads owe the bytes).
    token, names = "", 0
    while True:
        page = served(partial(page_of, token), "a page of B's fat jobs")
        names, token = names + len(page.jobs), page.next_page_token
        if not token:
            break
    assert names == FAT_JOBS, names
    walk = {"token": ""}

    def next_page() -> str:
        """Each call one page, the threads walking the pages over and over."""
        walk["token"] = page_of(walk["token"]).next_page_token
        return "a page"

    with suite.canary.window("ListJobs of fat rows in parallel") as window:
        counts = hammer(WINDOW, 8, 4.0, next_page)
    print(f"\nB paging through its {FAT_JOBS} fat jobs from 8 threads: {dict(counts)}; "
          f"largest page {largest['bytes'] / 2**20:.2f} MiB")
    suite.check(window)
    assert set(counts) <= {"a page", "RESOURCE_EXHAUSTED"}, counts
    # Served while its read budget lasts (each 3 MiB page owes 48 reads more), then refused.
    assert counts["a page"] and counts["RESOURCE_EXHAUSTED"], counts
    # Bounded in bytes: a page is 3 MiB of rows and at most one row past it.
    assert largest["bytes"] <= PAGE_BYTES + FAT_PAYLOAD + 64 * 1024, largest


def test_the_worker_slot_hog(suite: Suite) -> None:
    stub = suite.stub
    two_hours = Duration()
    two_hours.FromTimedelta(timedelta(hours=2))

    def running_runs() -> list[pb.Run]:
        return list(served(partial(stub.ListRuns, pb.ListRunsRequest(
            status=pb.RUN_STATUS_RUNNING, page_size=1000), timeout=30, metadata=B),
            "B's ListRuns").runs)

    def running() -> int:
        return len(running_runs())

    most = 0
    hogs: list[str] = []
    try:
        with suite.canary.window("the worker-slot hog") as window:
            hogs += [create_b(stub, name=f"hog-{n}", cron="* * * * * *", handler="sleep",
                              payload=b'{"seconds": 3600}', timeout=two_hours).job_id
                     for n in range(HOG_JOBS)]
            wait_for(lambda: running() >= SLOTS // 2, 60,
                     "the hog holding its half of the slots")
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                most = max(most, running())
                time.sleep(0.5)  # sampling, not waiting for a result
    finally:
        # Deleting a job cancels its runs not started; runs going go on (to their two-hour
        # timeout here, in B's share of the slots): cancelled, their handlers are stopped.
        for job_id in hogs:
            served(partial(stub.DeleteJob, pb.DeleteJobRequest(request_id=rid(),
                                                               job_id=job_id),
                           timeout=30, metadata=B), "B's DeleteJob")
        cancelled: set[str] = set()

        def stopped() -> bool:
            runs = running_runs()
            for run in runs:
                if run.run_id not in cancelled:
                    cancelled.add(run.run_id)
                    served(partial(stub.CancelRun, pb.CancelRunRequest(
                        request_id=rid(), run_id=run.run_id), timeout=30, metadata=B),
                        "B's CancelRun")
            return not runs

        wait_for(stopped, 45, "the hog's attempts cancelled and stopped", interval=1.0)
    print(f"\nthe hog held at most {most} of {SLOTS} slots")
    # Without the share its eight new runs a second take every slot within 2 s.
    assert most <= SLOTS // 2, f"the hog held {most} of {SLOTS} slots while the canary ran"
    suite.check(window)


def fill_history(settings: Any) -> None:
    """A million runs of B's in the last hour, written straight into the history as the
    projector would have left them: every chart of B's overview reads them all."""
    from clickhouse_driver import Client

    client = Client(host=settings.clickhouse_host, port=settings.clickhouse_port,
                    user=settings.clickhouse_user, password=settings.clickhouse_password)
    db = settings.clickhouse_database
    now = int(datetime.now(UTC).timestamp())
    columns = ("scheduled_at, scheduled_at_us, tenant, job_id, run_id, attempt, run_status, "
               "started_at_us, finished_at_us, start_lag_us, version")
    client.execute(
        f"INSERT INTO {db}.runs ({columns}) "
        f"SELECT toDateTime({now} - number % 3500), ({now} - number % 3500) * 1000000, "
        "'b', concat('job-', toString(number % 1000)), concat('heavy-', toString(number)), "
        "1, if(number % 50 = 0, 'failed', 'succeeded'), 1, 2, number % 3000000, 1 "
        f"FROM numbers({HEAVY_RUNS})")
    client.disconnect()


def test_heavy_console_pages_in_parallel(suite: Suite) -> None:
    fill_history(suite.service.settings)
    b_session = signed_in(suite.console, B_TOKEN)
    a_session = signed_in(suite.console, A_TOKEN)

    def heavy_page() -> str:
        return str(console_get(suite.console, "/overview", b_session)[0])

    with suite.canary.window("heavy console pages in parallel") as window, \
            PageTimer(suite.console, a_session) as a_pages:
        counts = hammer(WINDOW, 40, 1.0, heavy_page)
    print(f"\nB's overview pages from 40 threads: {dict(counts)}")
    # B's pages are served within its share, or told to come back (429), never an error.
    assert set(counts) <= {"200", "429"}, counts
    a_pages.check("B's heavy pages")
    suite.check(window)


def test_a_sign_in_flood(suite: Suite) -> None:
    a_session = signed_in(suite.console, A_TOKEN)
    b_first = signed_in(suite.console, B_TOKEN)
    form = sign_in_form(suite.console)

    def flood() -> str:
        return str(sign_in(suite.console, form, B_TOKEN)[0])

    with suite.canary.window("a sign-in flood") as window, \
            PageTimer(suite.console, a_session) as a_pages:
        counts = hammer(WINDOW, 4, 25.0, flood)
    print(f"\nB's sign-ins: {dict(counts)}")
    # Signed in (303), or refused while B's read budget is spent (the api's
    # RESOURCE_EXHAUSTED, 400 on the form).
    assert set(counts) <= {"303", "400"}, counts
    assert counts["303"] > 100, counts
    # B's flood ended B's own oldest sessions (100 a tenant), never A's.
    assert console_get(suite.console, "/jobs", a_session)[0] == 200
    assert console_get(suite.console, "/jobs", b_first)[0] == 303
    a_pages.check("B's sign-in flood")
    suite.check(window)


BUSY_JOBS = 6_000


def test_one_tenant_with_six_thousand_every_minute_jobs_under_the_default_limits(
        suite: Suite) -> None:
    """B creates 6,000 every-minute jobs spread over the minute (its job limit is 10,000;
    the in-flight limit, 1,000, counts what occupies capacity: commands/owner/in_flight.py), about
    100 runs a second: B's own runs start on time, every fire time once, and so does A's
    canary. Last: its load stays until the module ends."""
    from clickhouse_driver import Client

    from cronlog.infra.config import Settings

    stub = suite.stub
    items = [pb.CreateJobRequest(request_id=rid(), spec=pb.JobSpec(
        name=f"minutely-{n}", handler="echo", cron=f"{n % 60} * * * * *"))
        for n in range(BUSY_JOBS)]
    with suite.canary.window("6,000 every-minute jobs") as window:
        for start in range(0, BUSY_JOBS, 1000):
            batch = pb.CreateJobsRequest(items=items[start:start + 1000])
            results = served(partial(stub.CreateJobs, batch, timeout=60, metadata=B),
                             f"B's jobs {start} to {start + 1000}").results
            assert all(r.WhichOneof("outcome") == "job" for r in results), [
                r.error for r in results if not r.HasField("job")][:3]
        # From half a minute after the last job: every job has had a run enqueued ahead.
        first = int(time.time()) + 30
        last = first + 10
        wait_for(lambda: time.time() > last + 1, 60, "B's window of fire times", interval=0.5)
    settings = suite.service.settings
    assert isinstance(settings, Settings)
    client = Client(settings.clickhouse_host, port=settings.clickhouse_port,
                    user=settings.clickhouse_user, password=settings.clickhouse_password)
    expected = sum(1 for n in range(BUSY_JOBS) for t in range(first, last + 1)
                   if t % 60 == n % 60)

    def b_runs() -> list[tuple[str, int, int, int]] | None:
        rows = client.execute(
            f"SELECT job_id, scheduled_at_us, count(), max(start_lag_us) "
            f"FROM {settings.clickhouse_database}.runs FINAL "
            "WHERE tenant = 'b' AND run_status = 'succeeded' AND job_id != '' "
            "AND scheduled_at_us BETWEEN %(first)s AND %(last)s "
            "AND run_id NOT LIKE 'heavy-%%' GROUP BY job_id, scheduled_at_us",
            {"first": first * 1_000_000, "last": last * 1_000_000})
        seen["rows"] = len(rows)
        return rows if len(rows) >= expected else None

    seen = {"rows": 0}
    try:
        rows = wait_for(b_runs, 90, f"every fire time of B's window ran ({expected})",
                        interval=2)
    except AssertionError as exc:
        [(status, count, lag)] = client.execute(
            f"SELECT groupUniqArray(run_status), count(), max(start_lag_us) "
            f"FROM {settings.clickhouse_database}.runs FINAL WHERE tenant = 'b' "
            "AND scheduled_at_us BETWEEN %(first)s AND %(last)s",
            {"first": first * 1_000_000, "last": last * 1_000_000})
        raise AssertionError(f"B's runs of {first}..{last}: {seen['rows']} succeeded of "
                             f"{expected}; all: {count} {status}, max lag {lag / 1e6} s") from exc
    finally:
        client.disconnect()
    lags = sorted(lag / 1e6 for *_, lag in rows)
    print(f"\nB's {len(rows)} runs of {first}..{last}: start lag p50 "
          f"{statistics.median(lags):.2f} s, p99 {lags[int(len(lags) * 0.99)]:.2f} s")
    assert len(rows) == expected and all(count == 1 for _, _, count, _ in rows), \
        "each of B's fire times once"
    assert lags[int(len(lags) * 0.99)] <= 2.0, f"B's p99 start lag (max {lags[-1]:.2f} s)"
    suite.check(window)
