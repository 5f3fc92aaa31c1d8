"""The scale workload on cronlog: a million jobs on 1,024 partitions, created through the
api's CreateJobs, then a top-of-the-hour burst and a takeover with all of them in place.

On topics and a database of its own, with --scale-partitions logical partitions over
--scale-kafka-partitions Kafka partitions (docs/partitions.md):

1. start: api processes, the schedulers (until they share every partition), the workers
   and the history projector;
2. background: the hourly and daily jobs (the mix's bulk) through CreateJobs, batches of
   1,000, a few in flight over the apis; timed until answered and until Postgres held
   them. They start (start_at) hours after the bench, so none is due while it runs: they
   are the registered jobs the schedulers hold, not load;
3. idle: the schedulers' CPU over 30 s in which nothing is due (nothing fires yet);
4. the top-of-the-hour jobs, hourly at one minute M of the hour (UTC), planned from the
   rate just measured to fall after their creation and the schedulers' lookahead (the
   bench cannot wait for a real top of the hour); then the every-minute jobs, each at its
   own second of the minute, which start EVERY_MINUTE_BEFORE ahead of the burst: its
   background load. Created while nothing fires, as a migration would create them; created
   while they fired, the earlier runs spent the hour on creation (docs/benchmarks.md);
5. the burst's start lag from the workers' start reports on the inbox: at 1,024 partitions
   the owners fall minutes behind on reports under this load, and the history projector
   further still, so neither the run events nor the history hold every start in time;
6. takeover: SIGTERM to one of the schedulers; another takes all its partitions.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import psycopg
from google.protobuf.timestamp_pb2 import Timestamp

from cronlog.domain.ids import run_id_for
from cronlog.infra.config import Settings
from cronlog.v1 import job_service_pb2 as pb
from cronlog.v1 import job_service_pb2_grpc as pb_grpc
from cronlog_dev.bench.bulk_create import (
    cpu_seconds,
    free_port,
    send_batches,
    stored_jobs,
    wait_serving,
)
from cronlog_dev.bench.committed_events import CommittedEvents, Offsets, ends
from cronlog_dev.bench.cronlog_service import CronlogService
from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.partitions_figures import default_kafka
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.role_cpu import read_trees, server_pids
from cronlog_dev.bench.rss import RssSampler
from cronlog_dev.bench.scale_figures import (
    Creation,
    IdleCpu,
    ScaleResult,
    background_cron,
    burst_cron,
    combined,
    creation,
    every_minute_cron,
    idle_cpu,
    job_mix,
    plan_burst,
)
from cronlog_dev.bench.stack import isolated_settings
from cronlog_dev.bench.start_lag import ReportedStarts
from cronlog_dev.bench.stats import BurstFigures, Start, burst_figures
from cronlog_dev.bench.takeover import Schedulers, TakeoverStalled, share_move, wait_balanced
from cronlog_dev.bench.takeover_figures import Takeover
from cronlog_dev.processes import spawn_role, stop_all

# The api is one Python process; two of them keep CreateJobs from waiting on one's GIL.
APIS = 2
BATCH_SIZE = 1000
IN_FLIGHT = 8
BACKGROUND_TENANTS = 4
MINUTE_TENANT = "scale-minute"
WARM_UP_TENANT = "scale-warmup"
WARM_UP_JOBS = 10
BURST_TENANT = "scale-burst"
# Far enough that no hourly or daily job fires while the bench runs (it takes under one).
BACKGROUND_START = timedelta(hours=3)
IDLE_SETTLE_SECONDS = 5.0
IDLE_WINDOW_SECONDS = 30.0
# Postgres must hold the answered jobs within this long after the last answer.
STORE_WITHIN = 300.0
MIN_LEAD = 10.0
# The every-minute jobs start (start_at) this long before the burst: two minutes of their
# load in place when the burst's runs are pre-enqueued and due.
EVERY_MINUTE_BEFORE = 150.0
# Room to spare when planning T from the measured creation rate: the burst's and the
# every-minute jobs are created faster than the hourly and daily ones before them (the
# rate planned with), and every second of spare room is a second of waiting for T.
PLAN_SAFETY = 1.15
_US = 1_000_000
# Every this many seconds the bench reads the inbox written since its last read: decoding
# it is the bench's own CPU, taken beside the system it measures.
LOG_READ_EVERY = 15.0
# A start before the cap reaches the inbox a little later (a worker ships its reports each
# time its loop comes round, and sends again what the broker did not take): one more read
# this long after the cap.
REPORT_SETTLE_SECONDS = 20.0
LAG_SOURCE = ("the workers' start reports on the inbox (Kafka) for the burst's runs due at T "
              "(run ids from the burst tenant's jobs and T): the first started_at (worker "
              "clock) of each minus T; read from the reports, not the run events or the "
              "history, because at 1,024 partitions the owners fell minutes behind on "
              "reports and the history projector further still")
BURST_JOBS_SQL = "SELECT job_id FROM jobs WHERE tenant = %s"


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _timestamp(at: datetime) -> Timestamp:
    return Timestamp(seconds=int(at.timestamp()))


def _batched(items: Iterator[pb.CreateJobRequest]) -> Iterator[pb.CreateJobsRequest]:
    batch: list[pb.CreateJobRequest] = []
    for item in items:
        batch.append(item)
        if len(batch) == BATCH_SIZE:
            yield pb.CreateJobsRequest(items=batch)
            batch = []
    if batch:
        yield pb.CreateJobsRequest(items=batch)


def _background(run: str, count: int, start_at: datetime) -> Iterator[pb.CreateJobRequest]:
    start = _timestamp(start_at)
    for i in range(count):
        cron, zone = background_cron(i)
        yield pb.CreateJobRequest(request_id=f"{run}-bg-{i}", spec=pb.JobSpec(
            name=f"scale-bg-{i}", tenant=f"scale-{i % BACKGROUND_TENANTS}", queue="default",
            handler="echo", cron=cron, time_zone=zone, start_at=start))


def _burst_jobs(run: str, count: int, due: float) -> Iterator[pb.CreateJobRequest]:
    cron = burst_cron(due)
    for i in range(count):
        yield pb.CreateJobRequest(request_id=f"{run}-burst-{i}", spec=pb.JobSpec(
            name=f"scale-burst-{i}", tenant=BURST_TENANT, queue="default", handler="echo",
            cron=cron, time_zone="UTC"))


def _every_minute(run: str, count: int, start_at: datetime) -> Iterator[pb.CreateJobRequest]:
    start = _timestamp(start_at)
    for i in range(count):
        yield pb.CreateJobRequest(request_id=f"{run}-minute-{i}", spec=pb.JobSpec(
            name=f"scale-minute-{i}", tenant=MINUTE_TENANT, queue="default", handler="echo",
            cron=every_minute_cron(i), time_zone="UTC", start_at=start))


def _warm_up_apis(stubs: list[pb_grpc.JobServiceStub], run: str, start_at: datetime) -> int:
    """A small untimed call to each api first: the first call of a fresh api waits for its
    Kafka clients (tens of seconds here), which is start-up, not the creation rate."""
    start, sent = _timestamp(start_at), 0
    for n, stub in enumerate(stubs):
        items = [pb.CreateJobRequest(request_id=f"{run}-warm-{n}-{i}", spec=pb.JobSpec(
            name=f"scale-warm-{n}-{i}", tenant=WARM_UP_TENANT, queue="default",
            handler="echo", cron="0 0 * * *", start_at=start)) for i in range(WARM_UP_JOBS)]
        results = stub.CreateJobs(pb.CreateJobsRequest(items=items), timeout=180).results
        sent += sum(1 for r in results if not r.HasField("error"))
    return sent


class _Progress:
    """A progress line every ~10 s."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total = what, total
        self.began = self.last = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last >= 10:
            self.last = now
            say(f"[cronlog] scale: {self.what}: {done:,} of {self.total:,} "
                f"({done / max(now - self.began, 1e-3):,.0f}/s)")


def _create(stubs: list[pb_grpc.JobServiceStub], dsn: str, items: Iterator[pb.CreateJobRequest],
            count: int, stored_before: int, what: str, store_until: float,
            check: Callable[[], None]) -> Creation:
    """Sends `count` items and waits until Postgres holds them (or time.time() reaches
    store_until)."""
    began = time.monotonic()
    failed = send_batches(stubs, _batched(items), IN_FLIGHT, _Progress(f"{what} answered", count))
    answered = time.monotonic() - began
    if failed:
        say(f"!! [cronlog] scale: {len(failed):,} items failed, first: {failed[:3]}")
    wanted = stored_before + count - len(failed)
    stored_at: float | None = None
    progress = _Progress(f"{what} in Postgres", wanted)
    while time.time() < store_until:
        n = stored_jobs(dsn)
        if n >= wanted:
            stored_at = time.monotonic() - began
            break
        progress(n)
        check()
        time.sleep(1.0)
    result = creation(count, len(failed), answered, stored_at)
    say(f"[cronlog] scale: {what}: {count:,} answered in {answered:.1f} s "
        f"({result.per_second_answered or 0:,.0f}/s), in Postgres after "
        f"{'-' if stored_at is None else f'{stored_at:.1f} s'}")
    return result


def _database_mb(dsn: str) -> float:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return round(int(row[0]) / 2**20, 1) if row else 0.0


def _measure_idle(schedulers: Schedulers) -> IdleCpu:
    time.sleep(IDLE_SETTLE_SECONDS)
    before, began = cpu_seconds(schedulers.processes), time.monotonic()
    time.sleep(IDLE_WINDOW_SECONDS)
    after, window = cpu_seconds(schedulers.processes), time.monotonic() - began
    return idle_cpu(window, {name: after[name] - before[name] for name in after})


def _burst_runs(dsn: str, due: float) -> list[str]:
    """The run ids of the burst's runs due at T: each job's run of a fire time has an id
    derived from both (domain/ids.py)."""
    at = _at(due)
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute(BURST_JOBS_SQL, (BURST_TENANT,)).fetchall()
    return [str(run_id_for(row[0], at)) for row in rows]


def _burst(settings: Settings, expected: int, runs: list[str], inbox_from: Offsets,
           due: float, max_wait: float, check: Callable[[], None],
           ) -> tuple[BurstFigures, list[str]]:
    deadline = due + max_wait
    log = CommittedEvents(settings, (settings.inbox_topic,), "the workers' start reports",
                          inbox_from)
    reported = ReportedStarts(runs)
    last_report = 0.0
    while True:
        check()
        log.follow(reported.feed)
        if reported.started >= expected or time.time() >= deadline:
            break
        if time.time() - last_report >= 30:
            say(f"[cronlog] scale: burst: {reported.started:,} of {expected:,} started "
                f"(from the workers' reports)")
            last_report = time.time()
        time.sleep(min(LOG_READ_EVERY, max(0.0, deadline - time.time())))
    if reported.started < expected:
        time.sleep(REPORT_SETTLE_SECONDS)
        log.follow(reported.feed)
    due_us = int(due * _US)
    starts = [Start(due_us, round(at.timestamp() * _US)) for at in reported.first_starts()]
    figures = burst_figures(due_us, expected, starts, int(deadline * _US))
    notes = [f"burst start lag source: {LAG_SOURCE}"]
    if reported.expected < expected:
        notes.append(f"Postgres held {reported.expected:,} of the {expected:,} burst jobs "
                     f"at T")
    if figures.started < expected:
        notes.append(f"{figures.started:,} of {expected:,} burst runs started within "
                     f"{max_wait:.0f} s of T")
    return figures, notes


def run_scale(stack_settings: Settings, options: BenchOptions, log_root: Path) -> ScaleResult:
    mix = job_mix(options.scale_jobs, options.scale_burst_jobs)
    logical = options.scale_partitions
    kafka = options.scale_kafka_partitions or default_kafka(logical)
    if logical % kafka:
        raise ValueError(f"--scale-kafka-partitions: {kafka} Kafka partitions do not divide "
                         f"the {logical} logical ones")
    settings = isolated_settings(stack_settings, "scale", options.worker_slots).with_overrides(
        partitions=logical, kafka_partitions=None if kafka == logical else kafka)
    if options.lookahead_ms:
        settings = settings.with_overrides(lookahead=timedelta(milliseconds=options.lookahead_ms))
    if options.sparse_lookahead_ms is not None:
        settings = settings.with_overrides(
            sparse_lookahead=timedelta(milliseconds=options.sparse_lookahead_ms))
    # Hourly jobs are pre-enqueued the sparse lookahead ahead (when it is on).
    lookahead = max(settings.lookahead, settings.sparse_lookahead).total_seconds()
    log_dir = log_root / "cronlog-scale"
    run = settings.group_prefix
    service = CronlogService(settings, log_dir, schedulers=0, workers=options.workers)
    schedulers = Schedulers(settings, log_dir)
    apis: dict[str, subprocess.Popen[bytes]] = {}
    channels: list[grpc.Channel] = []
    sampler = RssSampler()
    phases: dict[str, float] = {}
    creation_cpu: dict[str, float] = {}
    notes: list[str] = []
    first: Creation | None = None
    late: Creation | None = None
    database_mb: float | None = None
    idle: IdleCpu | None = None
    figures: BurstFigures | None = None
    taken: Takeover | None = None
    due = 0.0
    names = [f"scheduler-{n}" for n in range(1, options.schedulers + 1)]
    say(f"[cronlog] scale: {mix.total:,} jobs ({mix.hourly:,} hourly, {mix.daily:,} daily, "
        f"{mix.every_minute:,} every minute, {mix.burst:,} in the burst) on "
        f"{settings.partitions:,} logical over {settings.layout.kafka:,} Kafka partitions; "
        f"{APIS} apis, {len(names)} schedulers")

    def phase(name: str, began: float) -> None:
        phases[name] = round(time.monotonic() - began, 1)
        say(f"[cronlog] scale: {name} took {phases[name]:.1f} s")

    def check() -> None:
        service.check_alive()
        schedulers.check_alive(names)
        gone = [n for n, p in apis.items() if p.poll() is not None]
        if gone:
            raise RuntimeError(f"{', '.join(gone)} exited; see {log_dir}")

    try:
        began = time.monotonic()
        service.start()
        for name in names:
            schedulers.start(name, {"CRONLOG_SCHEDULER_METRICS_PORT": "0"})
        # The apis after the schedulers own every partition: the apis' warm-up calls would
        # otherwise wait for owners, and the start phase would hide in the creation rate.
        with psycopg.connect(settings.postgres_dsn, autocommit=True, connect_timeout=10) as conn:
            wait_balanced(conn, schedulers, names, settings.partitions,
                          settings.layout.per_kafka)
        for n in range(1, APIS + 1):
            address = f"127.0.0.1:{free_port()}"
            apis[f"api-{n}"] = spawn_role("api", settings.with_overrides(grpc_address=address),
                                          log_dir / f"api-{n}", {"CRONLOG_API_METRICS_PORT": "0"})
            channels.append(grpc.insecure_channel(address))
        for channel in channels:
            wait_serving(channel, {**apis, **service.processes, **schedulers.processes}, 180)
        for name, process in {**service.processes, **schedulers.processes, **apis}.items():
            sampler.watch(name, process.pid)
        sampler.start()
        stubs = [pb_grpc.JobServiceStub(c) for c in channels]
        warm = _warm_up_apis(stubs, run, _at(time.time()) + BACKGROUND_START)
        phase("start (processes up, partitions shared, apis warm)", began)

        began = time.monotonic()
        count = mix.hourly + mix.daily
        everyone = {**apis, **schedulers.processes, **service.processes}
        # The servers' share of creating a job too: most of the machine, at 1,024 partitions.
        servers = server_pids(stack_settings)
        cpu_before = {**cpu_seconds(everyone), **read_trees(servers)}
        first = _create(stubs, settings.postgres_dsn,
                        _background(run, count, _at(time.time()) + BACKGROUND_START), count, warm,
                        "hourly and daily jobs", time.time() + 86_400, check)
        cpu_after = {**cpu_seconds(everyone), **read_trees(servers)}
        creation_cpu = {n: round(cpu_after[n] - cpu_before[n], 1)
                        for n in cpu_before if n in cpu_after}
        say(f"[cronlog] scale: CPU s while creating: {creation_cpu}")
        phase("create hourly and daily jobs", began)

        began = time.monotonic()
        idle = _measure_idle(schedulers)
        say(f"[cronlog] scale: idle schedulers used {idle.per_second:.3f} CPU s/s over "
            f"{idle.window_seconds:.0f} s")
        phase("idle CPU", began)

        began = time.monotonic()
        stored = warm + count - first.failed
        rate = first.per_second_stored or first.per_second_answered or 0.0
        due = plan_burst(time.time(), mix.burst + mix.every_minute, rate,
                         max(lookahead, EVERY_MINUTE_BEFORE), MIN_LEAD, options.max_create,
                         PLAN_SAFETY)
        say(f"[cronlog] scale: burst due at {_at(due):%H:%M:%S} (cron '{burst_cron(due)}' UTC, "
            f"in {due - time.time():.0f} s); creating its {mix.burst:,} jobs")
        # The burst's start reports come after this: the bench reads the inbox from here.
        inbox_from = ends(settings, settings.inbox_topic)
        # Jobs still arriving within the lookahead would be fired late: creation counts
        # only until just before.
        late = _create(stubs, settings.postgres_dsn, _burst_jobs(run, mix.burst, due), mix.burst,
                       stored, "burst jobs", due - lookahead - 1, check)
        stored += mix.burst - late.failed
        if late.stored_seconds is None:
            notes.append(f"not every burst job was in Postgres {lookahead + 1:.0f} s before T")
        phase("create burst jobs", began)
        if mix.every_minute:
            began = time.monotonic()
            minute = _create(stubs, settings.postgres_dsn,
                             _every_minute(run, mix.every_minute, _at(due - EVERY_MINUTE_BEFORE)),
                             mix.every_minute, stored, "every-minute jobs", due - 1, check)
            late = combined(late, minute)
            phase("create every-minute jobs", began)
        database_mb = _database_mb(settings.postgres_dsn)

        began = time.monotonic()
        burst_runs = _burst_runs(settings.postgres_dsn, due)
        say(f"[cronlog] scale: Postgres database {database_mb:,.0f} MB; waiting for T")
        while time.time() < due:
            check()
            time.sleep(min(1.0, max(0.0, due - time.time())))
        phase("wait for T", began)
        began = time.monotonic()
        figures, burst_notes = _burst(settings, mix.burst, burst_runs, inbox_from, due,
                                      options.scale_max_wait, check)
        notes += burst_notes
        say(f"[cronlog] scale: burst {figures.started:,} of {mix.burst:,} started; lag p50 "
            f"{figures.lag.p50_ms} ms, p99 {figures.lag.p99_ms} ms, max {figures.lag.max_ms} ms")
        phase("burst (from T)", began)

        began = time.monotonic()
        if len(names) < 2:
            notes.append("takeover not measured: it needs two schedulers or more")
        else:
            with psycopg.connect(settings.postgres_dsn, autocommit=True,
                                 connect_timeout=10) as conn:
                taken = share_move(conn, schedulers, names, settings.partitions,
                                   "SIGTERM share", signal.SIGTERM)
        phase("takeover", began)
    except TakeoverStalled as exc:
        notes.append(str(exc))
        say(f"!! [cronlog] {exc}")
    finally:
        rss = sampler.stop()
        for channel in channels:
            channel.close()
        stop_all(list(apis.values()))
        schedulers.stop()
        service.stop()
    if options.owner_batch:
        notes.append(f"the schedulers ran with CRONLOG_OWNER_BATCH={options.owner_batch}")
    notes.append("the hourly and daily jobs start 3 h after the bench (start_at), so none "
                 "fires while it runs; the burst's jobs fire hourly at the minute of T (UTC) "
                 "instead of at the top of a real hour, which the bench cannot wait for; the "
                 "every-minute jobs, created after them, start "
                 f"{EVERY_MINUTE_BEFORE:.0f} s before T (start_at), each at its own second "
                 "of the minute")
    return ScaleResult(
        "cronlog", mix.total, settings.partitions, mix, APIS, len(names), options.workers,
        BATCH_SIZE, IN_FLIGHT, first or creation(0, 0, 0.0, None), late, database_mb, idle,
        _at(due).isoformat() if due else "", burst_cron(due) if due else "", figures, taken,
        rss, phases, creation_cpu, notes)
