"""CPU per role of a workload (issue 19): which processes are the servers, and the figures
per 1,000 runs."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from cronlog.infra.config import Settings
from cronlog_dev.bench import role_cpu
from cronlog_dev.bench.results import SteadyResult, _cpu_rows
from cronlog_dev.bench.role_cpu import (
    RoleCpu,
    RoleCpuWindow,
    cpu_notes,
    per_thousand,
    postgres_port,
    server_pids,
    tree_cpu_seconds,
)

SETTINGS = Settings(kafka_bootstrap="127.0.0.1:9092,127.0.0.1:9102",
                    postgres_dsn="postgresql://u:p@127.0.0.1:5433/cronlog",
                    clickhouse_port=9000)


def test_servers_are_the_processes_listening_on_their_ports() -> None:
    listening = [(9092, 11), (9102, 12), (5433, 20), (9000, 30), (8123, 30), (22, 1),
                 (9092, None)]
    assert server_pids(SETTINGS, lambda: listening) == {
        "kafka": 11, "kafka-2": 12, "postgres": 20, "clickhouse": 30}


def test_a_server_not_listening_is_left_out() -> None:
    assert server_pids(SETTINGS, lambda: [(5433, 20)]) == {"postgres": 20}


def test_the_postgres_port_of_a_dsn() -> None:
    assert postgres_port("postgresql://u:p@127.0.0.1:45832/cronlog") == 45832
    assert postgres_port("postgresql://u:p@db.example/cronlog") == 5432


def test_per_thousand_runs() -> None:
    assert per_thousand({"scheduler": 3.0, "kafka": 0.5}, 10_000) == {
        "scheduler": 0.3, "kafka": 0.05}
    assert per_thousand({"scheduler": 3.0}, 0) == {}


def test_a_tree_counts_its_children_and_what_they_reaped() -> None:
    # A child that burns CPU in a grandchild it waits for: the grandchild is gone by the
    # reading, its time is in the child's children times. The child says when it has reaped
    # the grandchild, so the reading does not race a starved machine's scheduler (0.3 s of
    # CPU once took more than 20 s of wall time beside the other test sessions).
    burn = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"
    child = subprocess.Popen([sys.executable, "-c",
                              f"import subprocess,sys,time;subprocess.run([sys.executable,"
                              f"'-c',{burn!r}]);print('reaped',flush=True);time.sleep(60)"],
                             stdout=subprocess.PIPE)
    try:
        assert tree_cpu_seconds(os.getpid()) is not None
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 300)
        assert ready, "the child did not reap its grandchild within 300 s"
        assert child.stdout.readline() == b"reaped\n"
        used = tree_cpu_seconds(child.pid)
        assert used is not None and used >= 0.3
    finally:
        child.kill()
        child.wait()
    assert tree_cpu_seconds(child.pid) is None


def test_a_window_reads_both_edges_and_sums_by_role(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([{"cronlog-scheduler-1": 1.0, "cronlog-scheduler-2": 2.0, "kafka": 5.0},
                     {"cronlog-scheduler-1": 2.0, "cronlog-scheduler-2": 4.0, "kafka": 5.5}])
    pids = {"cronlog-scheduler-1": 1, "cronlog-scheduler-2": 2, "kafka": 3}
    window = RoleCpuWindow(lambda: pids, tail_seconds=0.0)
    monkeypatch.setattr(role_cpu, "read_trees", lambda _: next(readings))
    # The window opens 1 s plus the lookahead before the first fire time.
    window.begin(first_due=time.time() + 0.9, seconds=0, lookahead=0.0)
    cpu = window.end(runs=2_000)
    assert cpu is not None
    assert cpu.core_seconds == {"scheduler": 3.0, "kafka": 0.5}
    assert cpu.per_1k_runs == {"scheduler": 1.5, "kafka": 0.25}


def test_the_steady_table_has_a_row_per_role_measured() -> None:
    cpu = RoleCpu(runs=1000, window_seconds=40.0, core_seconds={},
                  per_1k_runs={"scheduler": 0.25, "worker": 0.06, "postgres": 0.3},
                  source="test")
    result = SteadyResult.__new__(SteadyResult)
    result.cpu = cpu
    labels = {r.label: r.ours for r in _cpu_rows(result, None)}
    assert labels == {"steady: CPU s per 1k runs, scheduler": 0.25,
                      "steady: CPU s per 1k runs, worker": 0.06,
                      "steady: CPU s per 1k runs, postgres": 0.3,
                      "steady: CPU s per 1k runs, all roles": 0.61}


def test_a_steady_window_counts_the_rate_times_its_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The failover workload's baseline: the load goes on past the window, so its runs are
    the rate over the time between the two readings, not the fire times in it."""
    readings = iter([{"cronlog-scheduler-1": 10.0}, {"cronlog-scheduler-1": 13.0}])
    clock = iter([100.0, 100.0, 130.0, 130.0])  # each edge: how late, then the reading
    window = RoleCpuWindow(lambda: {"cronlog-scheduler-1": 1}, tail_seconds=0.0)
    monkeypatch.setattr(role_cpu, "read_trees", lambda _: next(readings))
    monkeypatch.setattr("cronlog_dev.bench.role_cpu.time",
                        SimpleNamespace(time=lambda: next(clock, 200.0)))
    window.between(0.0, 0.0)
    cpu = window.steady(rate=1_000)
    assert cpu is not None
    assert (cpu.runs, cpu.window_seconds) == (30_000, 30.0)
    assert cpu.per_1k_runs == {"scheduler": 0.1}


def test_the_notes_say_why_the_cpu_is_missing_and_which_servers_were_not_seen() -> None:
    missing = cpu_notes(None, {"kafka": 1})
    assert missing[0].startswith("the CPU per role was not read")
    assert "CPU of postgres, clickhouse not measured" in missing[1]
    read = RoleCpu(runs=1, window_seconds=1.0, core_seconds={}, per_1k_runs={}, source="t",
                   notes=["the CPU at the window's end was read 2.0 s late"])
    assert cpu_notes(read, {"kafka": 1, "postgres": 2, "clickhouse": 3}) == [
        "CPU per role: the CPU at the window's end was read 2.0 s late"]
