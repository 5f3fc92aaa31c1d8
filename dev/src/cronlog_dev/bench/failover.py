"""The failover workload on cronlog (issue 19): the steady workload's every-second jobs at
--failover-rate runs/s with three schedulers; one of them killed with -9, and later a fourth
added. It reports the start lag of the runs due from --failover-window seconds before each
event to as long after it (first attempt start minus fire time, from the committed event
log), how long the partitions that moved were without a firing owner, and the chaos suite's
log audit over every fire time of the window: nothing doubled, nothing missed.

The timeline (failover_figures.plan), in seconds after the first fire time T:

    T+5 .. T+5+W       baseline
    K = T+5+2W         kill -9 of the scheduler with the largest share; window K-W .. K+W
    A = K+2W           a fourth scheduler started;                     window A-W .. A+W
"""

from __future__ import annotations

import signal
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from cronlog.domain.ids import job_id_for_request
from cronlog.domain.spec import JobSpec
from cronlog.infra.config import Settings
from cronlog_dev.bench.committed_events import CommittedEvents
from cronlog_dev.bench.cronlog_service import CronlogService
from cronlog_dev.bench.cronlog_workloads import TENANT, _create, _service
from cronlog_dev.bench.failover_figures import (
    Audit,
    FailoverPlan,
    FailoverResult,
    WindowFigures,
    plan,
    render_failover,
    seconds_over_target,
)
from cronlog_dev.bench.log_audit import LogAudit, audit
from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.role_cpu import RoleCpu, RoleCpuWindow, cpu_notes, server_pids
from cronlog_dev.bench.start_lag import Window, run_starts, window_lags
from cronlog_dev.bench.takeover import (
    TAKE_WITHIN,
    Connection,
    Schedulers,
    TakeoverStalled,
    _largest_share,
    _observe,
    _owners,
    _poll,
)
from cronlog_dev.bench.takeover_figures import (
    OwnerRow,
    Takeover,
    balanced,
    newly_owned,
    shares,
    takeover,
)

SCHEDULERS = 3
WORKLOAD = "failover"
LAG_SOURCE = ("the committed event log (run-events, job-events), read after the window: "
              "the first AttemptStarted.started_at (worker clock) of each scheduled run minus "
              "its RunScheduled.scheduled_at (its fire time; no jitter); ownership from "
              "partition_owners in Postgres polled every 20 ms and the schedulers' `took "
              "partitions` log lines")
# Reading the whole log and auditing it costs seconds of CPU: not more often than this.
AUDIT_EVERY = 10.0


class EventLog:
    """Both event topics' committed messages, kept as read."""

    def __init__(self, settings: Settings) -> None:
        self._log = CommittedEvents(
            settings, (settings.run_events_topic, settings.job_events_topic), "the event log")
        self.events: list[tuple[str, dict[str, Any]]] = []

    def follow(self) -> list[tuple[str, dict[str, Any]]]:
        self._log.follow(lambda name, record: self.events.append((name, dict(record))))
        return self.events


def _until(at: float, service: CronlogService) -> None:
    while (left := at - time.time()) > 0:
        service.check_alive()
        time.sleep(min(left, 0.2))


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _kill(conn: Connection, service: CronlogService, schedulers: Schedulers,
          at: float) -> tuple[str, Takeover]:
    """kill -9 of the scheduler holding the largest share at `at`; the figures of its
    partitions' takeover by the others."""
    _until(at - 0.5, service)
    before = _owners(conn)
    victim, moving = _largest_share(before, schedulers)
    survivors = [n for n in schedulers.live() if n != victim]
    _until(at, service)
    began = schedulers.send(victim, signal.SIGKILL)
    schedulers.wait_exit(victim, 10)
    # A process the workload killed is not a process that died.
    service.processes.pop(victim, None)
    say(f"[cronlog] killed {victim} (partitions {moving}) at {_at(began):%H:%M:%S.%f}")
    result = _observe(conn, schedulers, "kill -9", began, before, moving,
                      schedulers.instance_id(victim), survivors)
    return victim, result


def _add(conn: Connection, service: CronlogService, schedulers: Schedulers, name: str,
         at: float) -> Takeover:
    """Starts scheduler `name` at `at`; the figures of the share it ends up with, from its
    start until it had caught up with every partition of it."""
    _until(at, service)
    before = _owners(conn)
    began = schedulers.start(name, {"CRONLOG_SCHEDULER_METRICS_PORT": "0"})
    service.processes[name] = schedulers.processes[name]
    say(f"[cronlog] started {name} at {_at(began):%H:%M:%S.%f}")
    names = schedulers.live()
    owners = [schedulers.instance_id(n) for n in names]
    seen: list[tuple[float, dict[int, OwnerRow]]] = list(_poll(
        conn, began + TAKE_WITHIN, lambda r: balanced(r, owners, len(before)),
        lambda: schedulers.check_alive(names)))
    final = seen[-1][1]
    if not balanced(final, owners, len(before)):
        raise TakeoverStalled(f"{len(names)} schedulers did not share the partitions within "
                              f"{TAKE_WITHIN:.0f} s of starting {name}")
    mine = schedulers.instance_id(name)
    moving = shares(final).get(mine, [])

    def taken(rows: dict[int, OwnerRow]) -> list[OwnerRow]:
        return [r for r in newly_owned(before, rows, moving, None) if r.owner == mine]

    epochs_at = caught_up_at = None
    for at_, rows in seen:
        now_taken = taken(rows)
        if epochs_at is None and len(now_taken) == len(moving):
            epochs_at = at_
        if (caught_up_at is None and len(now_taken) == len(moving)
                and all(r.caught_up for r in now_taken)):
            caught_up_at = at_
    time.sleep(0.5)  # the take's log line follows its caught-up mark
    return takeover("added", began, len(moving), epochs_at, caught_up_at,
                    [r.taken_at for r in taken(final)], schedulers.takes_since([name], began))


def _audit_when_complete(log: EventLog, expected: dict[str, list[datetime]],
                         service: CronlogService, deadline: float) -> LogAudit:
    """Reads the log until every expected fire time is recorded and every run finished, or
    until the deadline; the audit of what it then holds, the worker's AttemptStarted
    reports standing for executions (the bench's echo handler records nothing itself)."""
    while True:
        service.check_alive()
        result = audit(log.follow(), expected, [])
        if not result.waiting_for() or time.time() >= deadline:
            break
        say(f"[cronlog] waiting for the log: {result.waiting_for()[:200]}")
        time.sleep(AUDIT_EVERY)
    started = [str(r.get("run_id")) for n, r in log.events
               if n == "AttemptStarted" or r.get("started_at") is not None]
    return audit(log.events, expected, started)


def _windows(first: float, timeline: FailoverPlan) -> list[Window]:
    return [Window(s.kind, s.label, _at(first + s.start_s), _at(first + s.end_s))
            for s in timeline.spans]


def run_failover(stack_settings: Settings, options: BenchOptions,
                 log_root: Path) -> FailoverResult:
    rate = options.failover_rate
    timeline = plan(options.failover_window, SCHEDULERS)
    shaped = replace(options, schedulers=SCHEDULERS, steady_rate=rate,
                     steady_seconds=timeline.seconds)
    if options.owner_session_timeout_ms:
        stack_settings = stack_settings.with_overrides(
            owner_session_timeout=timedelta(milliseconds=options.owner_session_timeout_ms))
    service, sampler = _service(stack_settings, shaped, WORKLOAD, log_root)
    settings = service.settings
    notes: list[str] = []
    servers = server_pids(stack_settings)
    # The baseline's CPU, read at its first and last fire times: the load is steady there.
    cpu_window = RoleCpuWindow(lambda: {**service.pids(), **servers}, tail_seconds=0.0)
    cpu: RoleCpu | None = None
    kill_takeover = added_takeover = None
    killed = ""
    try:
        service.start()
        for name, pid in service.pids().items():
            sampler.watch(name, pid)
        sampler.start()
        schedulers = Schedulers(settings, service.log_dir)
        schedulers.processes.update({n: p for n, p in service.processes.items()
                                     if n.startswith("scheduler")})
        say(f"[cronlog] failover: {rate:,} jobs firing every second for {timeline.seconds} s "
            f"on {settings.partitions} partitions; kill -9 at T+{timeline.kill_s} s, a "
            f"fourth scheduler at T+{timeline.add_s} s")
        first, creation = _create(settings, shaped, WORKLOAD, rate, lambda start, i: JobSpec(
            name=f"{WORKLOAD}-{i}", tenant=TENANT, queue="default", handler="echo",
            cron="* * * * * *", start_at=_at(start), end_at=_at(start + timeline.seconds - 1)),
            settings.lookahead)
        if creation.in_place < rate:
            notes.append(f"only {creation.in_place:,} of {rate:,} jobs were in place before "
                         "the window")
        baseline = timeline.spans[0]
        cpu_window.between(first + baseline.start_s, first + baseline.end_s)
        with psycopg.connect(settings.postgres_dsn, autocommit=True,
                             connect_timeout=10) as conn:
            try:
                killed, kill_takeover = _kill(conn, service, schedulers,
                                              first + timeline.kill_s)
                added = f"scheduler-{SCHEDULERS + 1}"
                added_takeover = _add(conn, service, schedulers, added, first + timeline.add_s)
                sampler.watch(f"cronlog-{added}", service.processes[added].pid)
            except TakeoverStalled as exc:
                notes.append(str(exc))
                say(f"!! [cronlog] {exc}")
        last = first + timeline.seconds
        _until(last + 5, service)
        log = EventLog(settings)
        job_ids = [str(job_id_for_request(TENANT, f"{WORKLOAD}-{i}")) for i in range(rate)]
        times = [_at(first + s) for s in range(timeline.seconds)]
        result = _audit_when_complete(log, dict.fromkeys(job_ids, times), service,
                                      last + options.max_wait)
        rss = sampler.stop()
        cpu = cpu_window.steady(rate)
    finally:
        cpu_window.stop()
        sampler.stop()
        service.stop()
    notes += cpu_notes(cpu, servers)
    if cpu is not None:
        notes.append("CPU per role: each process tree's user + system seconds between the "
                     "baseline's first and last fire times, divided by the runs/s times "
                     "those seconds (the load is steady there)")
    starts = run_starts(log.events)
    lags = window_lags(starts, _windows(first, timeline))
    windows = [WindowFigures(w.kind, w.label, _at(first + s.start_s).isoformat(),
                             _at(first + s.end_s - 1).isoformat(), w.lag, w.not_started,
                             seconds_over_target(starts, _at(first + s.start_s),
                                                 _at(first + s.end_s - 1)))
               for w, s in zip(lags, timeline.spans, strict=True)]
    found = Audit(rate, rate * timeline.seconds, result.runs_scheduled, result.missed_runs,
                  result.violations, result.waiting_for()[:500])
    if result.duplicate_fire_times or result.missing_fire_times:
        notes.append(f"fire times doubled (e.g. {result.duplicate_fire_times[:3]}) or missed "
                     f"(e.g. {result.missing_fire_times[:3]})")
    session_timeout = settings.owner_session_timeout.total_seconds()
    if options.failover_window < session_timeout + 5:
        notes.append(f"the {options.failover_window} s half window is shorter than the "
                     "kill's takeover: some late runs fall outside it")
    figures = FailoverResult(
        "cronlog", rate, settings.partitions, SCHEDULERS,
        settings.lookahead.total_seconds(), session_timeout, _at(first).isoformat(),
        _at(first + timeline.kill_s).isoformat(), _at(first + timeline.add_s).isoformat(),
        killed, windows, kill_takeover, added_takeover, found, LAG_SOURCE, rss, notes, cpu)
    say("[cronlog] failover:\n" + render_failover(figures))
    return figures

