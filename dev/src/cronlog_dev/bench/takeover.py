"""The takeover workload on cronlog: how long schedulers take to own partitions, at each
partition count of --takeover-partitions.

Per count, on topics and a database of its own: a seeding scheduler decides the CreateJob
commands of --takeover-jobs jobs (due in a day, so nothing fires) and leaves. Then:

1. cold start: one scheduler process starts and takes every partition;
2. SIGTERM: two more join; once the three hold a share each, the largest share's holder
   gets SIGTERM and the others take its partitions;
3. SIGKILL: a third scheduler joins again; once balanced, the largest share's holder is
   killed, and the others take its partitions once the group notices (the session timeout).

Each is timed from outside, in Postgres (partition_owners: a new epoch per partition taken,
and the caught-up mark the owner sets after its catch-up), and by the take times the
schedulers themselves log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from cronlog.domain.spec import JobSpec
from cronlog.infra.config import Settings
from cronlog.infra.provision import provision
from cronlog_dev.bench.cronlog_jobs import send_create_commands, wait_for_jobs
from cronlog_dev.bench.options import BenchOptions, takeover_plan
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.results import TakeoverResult, TakeoverRun
from cronlog_dev.bench.stack import isolated_settings
from cronlog_dev.bench.takeover_figures import (
    LoggedTake,
    OwnerRow,
    Takeover,
    balanced,
    newly_owned,
    parse_takes,
    shares,
    takeover,
    target_verdict,
)
from cronlog_dev.processes import spawn_role, stop_all

TENANT = "bench-takeover"
# The scheduler's inbox consumer's session.timeout.ms (infra/kafka/owner_transport.py): how
# long the group takes to notice a killed member.
SESSION_TIMEOUT_SECONDS = 10.0
# An owner transaction of 500 CreateJobs spread over 1,024 partitions timed out on the
# single local broker; 100 worked. Only the seeding scheduler decides commands.
SEED_OWNER_BATCH = 100
# Polling partition_owners this often bounds how finely the bench sees a takeover end.
POLL_SECONDS = 0.02
SETTLE_WITHIN = 180.0
TAKE_WITHIN = 60.0
SOURCE = ("partition_owners in Postgres, polled every 20 ms: a new epoch per partition (its "
          "taken_at is the first new epoch) and the caught-up mark the owner sets after its "
          "catch-up; the taking schedulers' own `took partitions ... in N.NNs` log lines")

Connection = psycopg.Connection[tuple[Any, ...]]

SELECT_OWNERS = """
SELECT partition, epoch, owner, caught_up_member IS NOT NULL,
       extract(epoch FROM taken_at)::float8
FROM partition_owners
"""


class TakeoverStalled(RuntimeError):
    """The schedulers did not reach the state the workload waits for in time."""


def _owners(conn: Connection) -> dict[int, OwnerRow]:
    rows = conn.execute(SELECT_OWNERS).fetchall()
    return {int(r[0]): OwnerRow(int(r[0]), int(r[1]), None if r[2] is None else str(r[2]),
                                bool(r[3]), None if r[4] is None else float(r[4]))
            for r in rows}


class Schedulers:
    """The workload's scheduler processes, each with its own name, instance id and log."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def instance_id(self, name: str) -> str:
        return f"{self.settings.group_prefix}-{name}"

    def start(self, name: str, extra_env: dict[str, str] | None = None) -> float:
        """Starts one; returns the instant just before (epoch seconds)."""
        began = time.time()
        self.processes[name] = spawn_role(
            "scheduler", self.settings, self.log_dir / name,
            {"CRONLOG_INSTANCE_ID": self.instance_id(name), **(extra_env or {})})
        return began

    def name_of(self, instance_id: str) -> str:
        return next(n for n in self.processes if self.instance_id(n) == instance_id)

    def live(self) -> list[str]:
        return [n for n, p in self.processes.items() if p.poll() is None]

    def send(self, name: str, signum: signal.Signals) -> float:
        began = time.time()
        os.kill(self.processes[name].pid, signum)
        return began

    def wait_exit(self, name: str, within: float) -> int | None:
        try:
            return self.processes[name].wait(within)
        except subprocess.TimeoutExpired:
            return None

    def takes_since(self, names: list[str], since: float) -> list[LoggedTake]:
        out: list[LoggedTake] = []
        for name in names:
            path = self.log_dir / name / "scheduler.log"
            if path.exists():
                with path.open(errors="replace") as lines:
                    out += [t for t in parse_takes(lines) if t.at >= since]
        return out

    def check_alive(self, names: list[str]) -> None:
        for name in names:
            proc = self.processes[name]
            if proc.poll() is not None:
                raise TakeoverStalled(f"scheduler {name} exited with {proc.returncode}; see "
                                      f"{self.log_dir / name / 'scheduler.log'}")

    def stop(self) -> None:
        stop_all(list(self.processes.values()))


def _poll(conn: Connection, until: float,
          done: Callable[[dict[int, OwnerRow]], bool],
          alive: Callable[[], None]) -> Iterator[tuple[float, dict[int, OwnerRow]]]:
    """Snapshots of partition_owners with the instant each was read, until `done` holds or
    time.time() passes `until`."""
    while True:
        rows = _owners(conn)
        at = time.time()
        yield at, rows
        if done(rows) or at >= until:
            return
        alive()
        time.sleep(POLL_SECONDS)


def wait_balanced(conn: Connection, schedulers: Schedulers,
                   names: list[str], partitions: int, per_kafka: int = 1
                   ) -> dict[int, OwnerRow]:
    owners = [schedulers.instance_id(n) for n in names]
    # The last snapshot read: the balanced one, or the one at the deadline.
    *_, (_, rows) = _poll(conn, time.time() + SETTLE_WITHIN,
                          lambda r: balanced(r, owners, partitions, per_kafka),
                          lambda: schedulers.check_alive(names))
    if not balanced(rows, owners, partitions, per_kafka):
        counts = {k: len(v) for k, v in shares(rows).items()}
        raise TakeoverStalled(f"{', '.join(names)} did not share the {partitions} partitions "
                              f"within {SETTLE_WITHIN:.0f} s (owners now: {counts})")
    return rows


def observe(conn: Connection, schedulers: Schedulers, kind: str,
             began: float, before: dict[int, OwnerRow], moving: list[int],
             leaving: str | None, takers: list[str]) -> Takeover:
    """Watches `moving` until another owner than `leaving` holds each at a new epoch and has
    caught up; the figures of that takeover."""
    epochs_at: float | None = None
    caught_up_at: float | None = None
    rows: dict[int, OwnerRow] = {}

    def caught_up(now: dict[int, OwnerRow]) -> bool:
        taken = newly_owned(before, now, moving, leaving)
        return len(taken) == len(moving) and all(r.caught_up for r in taken)

    for at, rows in _poll(conn, began + TAKE_WITHIN, caught_up,
                          lambda: schedulers.check_alive(takers)):
        taken = newly_owned(before, rows, moving, leaving)
        if epochs_at is None and len(taken) == len(moving):
            epochs_at = at
        if caught_up(rows):
            caught_up_at = at
    taken = newly_owned(before, rows, moving, leaving)
    # The log line comes right after the caught-up mark; give the file a moment.
    time.sleep(0.5)
    return takeover(kind, began, len(moving), epochs_at, caught_up_at,
                    [r.taken_at for r in taken], schedulers.takes_since(takers, began))


# failover.py imports it under its earlier, private name.
_observe = observe


def _seed(settings: Settings, schedulers: Schedulers, jobs: int,
          conn: Connection) -> int:
    """Puts `jobs` jobs in the log through a scheduler of its own, then stops it; returns
    how many its owner decided."""
    schedulers.start("seed", {"CRONLOG_OWNER_BATCH": str(SEED_OWNER_BATCH)})
    wait_balanced(conn, schedulers, ["seed"], settings.partitions, settings.layout.per_kafka)
    if not jobs:
        seen = 0
    else:
        far = datetime.fromtimestamp(time.time(), UTC) + timedelta(days=1)
        send_create_commands(settings, "takeover", (
            JobSpec(name=f"takeover-{i}", tenant=TENANT, queue="default", handler="echo",
                    at=far) for i in range(jobs)))
        seen, _ = wait_for_jobs(settings.postgres_dsn, TENANT, jobs, time.time() + 300,
                                progress=lambda n: say(f"[cronlog] {n:,} of {jobs:,} jobs in "
                                                       "the log"))
    schedulers.send("seed", signal.SIGTERM)
    if schedulers.wait_exit("seed", 60) is None:
        raise TakeoverStalled("the seeding scheduler did not stop within 60 s of SIGTERM")
    return seen


def say_takeover(t: Takeover) -> None:
    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s"

    logged = "-" if t.longest_logged_take is None else (
        f"{t.longest_logged_take:.2f} s longest of {len(t.logged_take_seconds)} "
        f"({t.logged_partitions:,} partitions)")
    say(f"[cronlog]   {t.kind}: {t.partitions:,} partitions; new epochs {s(t.seconds_to_epochs)}, "
        f"all caught up {s(t.seconds_to_caught_up)} "
        f"({'-' if t.ms_per_partition is None else f'{t.ms_per_partition:.1f}'} ms a partition); "
        f"first new epoch after {s(t.seconds_to_first_epoch)}, then "
        f"{s(t.seconds_after_first_epoch)}; logged take {logged}")


def _largest_share(rows: dict[int, OwnerRow], schedulers: Schedulers) -> tuple[str, list[int]]:
    owner, moving = max(shares(rows).items(), key=lambda kv: (len(kv[1]), kv[0]))
    return schedulers.name_of(owner), moving


def share_move(conn: Connection, schedulers: Schedulers,
                names: list[str], partitions: int, kind: str,
                signum: signal.Signals) -> Takeover:
    before = wait_balanced(conn, schedulers, names, partitions)
    victim, moving = _largest_share(before, schedulers)
    survivors = [n for n in names if n != victim]
    began = schedulers.send(victim, signum)
    result = observe(conn, schedulers, kind, began, before, moving,
                      schedulers.instance_id(victim), survivors)
    code = schedulers.wait_exit(victim, 30)
    if code is None:
        say(f"[cronlog]   {victim} still running 30 s after {signum.name}; killing it")
        schedulers.send(victim, signal.SIGKILL)
        schedulers.wait_exit(victim, 10)
    say_takeover(result)
    return result


def _one_count(stack_settings: Settings, options: BenchOptions, log_root: Path,
               partitions: int, jobs: int) -> TakeoverRun:
    settings = isolated_settings(stack_settings, f"takeover{partitions}",
                                 options.worker_slots).with_overrides(partitions=partitions)
    say(f"[cronlog] takeover at {partitions:,} partitions: provisioning, then {jobs:,} jobs "
        "into the log")
    provision(settings)
    schedulers = Schedulers(settings, log_root / f"cronlog-takeover-{partitions}")
    cold = sigterm = sigkill = None
    notes: list[str] = []
    seen = 0
    try:
        with psycopg.connect(settings.postgres_dsn, autocommit=True,
                             connect_timeout=10) as conn:
            seen = _seed(settings, schedulers, jobs, conn)
            if seen < jobs:
                notes.append(f"only {seen:,} of {jobs:,} jobs reached the log in 300 s")
            before = _owners(conn)
            began = schedulers.start("s1")
            cold = observe(conn, schedulers, "cold start", began, before,
                            sorted(before), schedulers.instance_id("seed"), ["s1"])
            say_takeover(cold)
            schedulers.start("s2")
            schedulers.start("s3")
            sigterm = share_move(conn, schedulers, ["s1", "s2", "s3"], partitions,
                                  "SIGTERM share", signal.SIGTERM)
            schedulers.start("s4")
            sigkill = share_move(conn, schedulers, schedulers.live(), partitions,
                                  "SIGKILL share", signal.SIGKILL)
    except TakeoverStalled as exc:
        notes.append(str(exc))
        say(f"!! [cronlog] {exc}")
    finally:
        schedulers.stop()
    verdict = (target_verdict(partitions, sigterm, sigkill)
               if sigterm is not None and sigkill is not None else "not measured")
    say(f"[cronlog]   {verdict}")
    return TakeoverRun(partitions, jobs, seen, SESSION_TIMEOUT_SECONDS, cold, sigterm, sigkill,
                       verdict, notes)


def run_takeover(stack_settings: Settings, options: BenchOptions,
                 log_root: Path) -> TakeoverResult:
    runs = [_one_count(stack_settings, options, log_root, partitions, jobs)
            for partitions, jobs in takeover_plan(options.takeover_partitions,
                                                  options.takeover_jobs)]
    notes = [f"{r.partitions:,} partitions: {n}" for r in runs for n in r.notes]
    notes += [r.verdict for r in runs]
    notes.append("the projection was current before each takeover (every owner applies what "
                 "it commits), so each catch-up replays little: the jobs make the log "
                 "and the topics' offsets non-trivial, not the replay long")
    return TakeoverResult("cronlog", runs, SOURCE, notes=notes)
