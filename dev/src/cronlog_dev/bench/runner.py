"""`cronlog-dev bench`: starts the bench's servers, runs each workload on each system in
turn, prints the side-by-side table and writes the results, and stops everything it
started, also on Ctrl-C and on errors."""

from __future__ import annotations

import os
import platform
import signal
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import psutil

from cronlog.infra.config import Settings
from cronlog_dev.bench import (
    cronlog_workloads,
    failover,
    metrics_cost,
    partitions,
    pgq_workloads,
    takeover,
)
from cronlog_dev.bench.failover_figures import FailoverResult, render_failover
from cronlog_dev.bench.metrics_cost_figures import MetricsCostResult, render_metrics_cost
from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.partitions_figures import PartitionsResult, render_partitions
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.results import (
    Result,
    render_rss,
    render_table,
    rows,
    to_jsonable,
    write_json,
)
from cronlog_dev.bench.scale_figures import ScaleResult, render_scale
from cronlog_dev.bench.stack import bench_stack, fresh_start

if TYPE_CHECKING:
    from cronlog_dev.bench.pgq_scale import PgqScaleResult


def _raise_interrupt(_signum: int, _frame: FrameType | None) -> None:
    # SIGTERM unwinds like Ctrl-C, through every finally that stops a process or server.
    raise KeyboardInterrupt


def python_loop_seconds() -> float:
    """Seconds for ten million additions in pure Python: how fast this machine's CPU was
    just then. On a shared machine it drifts by half over minutes, and so do all figures."""
    started = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return round(time.perf_counter() - started, 3)


def stolen_cpu_seconds() -> float:
    """CPU time the hypervisor gave to other guests while this machine's processes wanted
    it, summed over its CPUs since boot (0 where the kernel does not count it)."""
    return float(getattr(psutil.cpu_times(), "steal", 0.0))


def machine() -> dict[str, Any]:
    return {
        "python_loop_seconds": python_loop_seconds(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        # Other work on the machine skews every figure; the 1/5/15-minute load says how much.
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "note": "Kafka, PostgreSQL, ClickHouse, every cronlog process, the pgqueuer worker "
                "and the bench itself on this one machine",
    }


# Said instead of measuring, and kept in the results, so a missing column is explained.
NO_EQUIVALENT = {("takeover", "pgqueuer"): "pgqueuer has no equivalent: its workers poll "
                 "one Postgres table, with no partitions or owners to take over",
                 ("metrics-cost", "pgqueuer"): "cronlog's own metrics only",
                 ("failover", "pgqueuer"): "pgqueuer has no scheduler to kill: its workers "
                 "poll one Postgres table",
                 ("partitions", "pgqueuer"): "pgqueuer has no partitions: its workers poll "
                 "one Postgres table"}


def _run_scale(system: str, settings: Settings, options: BenchOptions,
               log_root: Path) -> ScaleResult | PgqScaleResult:
    if system == "cronlog":
        from cronlog_dev.bench.scale import run_scale
        return run_scale(settings, options, log_root)
    from cronlog_dev.bench.pgq_scale import run_pgq_scale
    return run_pgq_scale(settings.postgres_dsn, options, log_root)


def run_bench(options: BenchOptions, state_root: Path) -> int:
    signal.signal(signal.SIGTERM, _raise_interrupt)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    bench_root = state_root / "bench"
    log_root = bench_root / "logs" / stamp
    stack = bench_stack(state_root, options.partitions)
    results: dict[str, dict[str, Result]] = {}
    # The scale workload's results have a table of their own (scale_figures).
    scale_results: dict[str, ScaleResult | PgqScaleResult] = {}
    errors: list[str] = []
    began = time.time()
    machine_at_start = machine()
    speeds: list[dict[str, Any]] = []
    skipped: list[str] = []
    say(f"starting the bench's Kafka, PostgreSQL and ClickHouse (Kafka on {stack.ports.kafka})")
    try:
        fresh_start(stack)
        settings = stack.settings()
        if options.owner_batch:
            settings = settings.with_overrides(owner_batch=options.owner_batch)
        if options.kafka_config:
            settings = settings.with_overrides(kafka_config=options.kafka_config)
        if options.warm_up_seconds and "cronlog" in options.systems:
            say(f"== warm-up: {options.warm_up_seconds} s of unmeasured load")
            cronlog_workloads.warm_up_servers(settings, options, log_root)
        for workload in options.workloads:
            for system in options.systems:
                if (workload, system) in NO_EQUIVALENT:
                    skipped.append(f"{workload} on {system}: "
                                   f"{NO_EQUIVALENT[(workload, system)]}")
                    say(f"== {skipped[-1]}")
                    continue
                speed = python_loop_seconds()
                speeds.append({"workload": workload, "system": system,
                               "python_loop_seconds": speed})
                say(f"== {workload} on {system} (machine speed: 10M additions in {speed:.2f} s)")
                stolen_before, began_workload = stolen_cpu_seconds(), time.monotonic()
                try:
                    if workload == "scale":
                        scale_results[system] = _run_scale(system, settings, options, log_root)
                        for note in scale_results[system].notes:
                            say(f"   note: {note}")
                        continue
                    result: Result
                    if system == "cronlog" and workload == "takeover":
                        result = takeover.run_takeover(settings, options, log_root)
                    elif system == "cronlog" and workload == "metrics-cost":
                        result = metrics_cost.run_metrics_cost(settings, options, log_root)
                    elif system == "cronlog" and workload == "failover":
                        result = failover.run_failover(settings, options, log_root)
                    elif system == "cronlog" and workload == "partitions":
                        result = partitions.run_partitions(settings, options, log_root)
                    elif system == "cronlog":
                        result = (
                            cronlog_workloads.run_burst(settings, options, log_root)
                            if workload == "burst"
                            else cronlog_workloads.run_steady(settings, options, log_root))
                    else:
                        result = pgq_workloads.run(workload, settings.postgres_dsn, options,
                                                   log_root)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:
                    # One side failing still leaves the other's figures worth keeping.
                    errors.append(f"{workload} on {system}: {type(exc).__name__}: {exc}")
                    say(f"!! {errors[-1]}")
                    continue
                finally:
                    stolen = round(stolen_cpu_seconds() - stolen_before, 1)
                    wall = round(time.monotonic() - began_workload, 1)
                    speeds[-1].update(stolen_cpu_seconds=stolen, workload_seconds=wall)
                    say(f"   {stolen} s of CPU stolen by the hypervisor in the workload's "
                        f"{wall} s (of {os.cpu_count()} CPUs)")
                results.setdefault(workload, {})[system] = result
                for note in result.notes:
                    say(f"   note: {note}")
    except KeyboardInterrupt:
        errors.append("interrupted")
        say("interrupted; stopping")
    finally:
        say("stopping the bench's servers")
        stack.stop()
    # Empty when only metrics-cost ran: it has a table of its own.
    table_rows = rows(results)
    table = render_table(table_rows) if table_rows else ""
    memory = render_rss(results)
    cost = results.get("metrics-cost", {}).get("cronlog")
    cost_table = render_metrics_cost(cost) if isinstance(cost, MetricsCostResult) else ""
    failover_result = results.get("failover", {}).get("cronlog")
    failover_table = (render_failover(failover_result)
                      if isinstance(failover_result, FailoverResult) else "")
    partitions_result = results.get("partitions", {}).get("cronlog")
    partitions_table = (render_partitions(partitions_result)
                        if isinstance(partitions_result, PartitionsResult) else "")
    ours_scale = next((r for r in scale_results.values() if isinstance(r, ScaleResult)), None)
    theirs_scale = next((r for r in scale_results.values() if not isinstance(r, ScaleResult)),
                        None)
    scale_table = render_scale(ours_scale, theirs_scale) if scale_results else ""
    if results or scale_results:
        print(*(t for t in (table, memory, cost_table, failover_table, scale_table,
                            partitions_table) if t),
              sep="\n\n", flush=True)
    else:
        say("no workload finished")
    document = {
        "machine_at_start": machine_at_start,
        "started_at": datetime.fromtimestamp(began, UTC).isoformat(),
        "seconds": round(time.time() - began, 1),
        "machine_at_end": machine(),
        # Measured right before each workload (speed) and over it (stolen CPU): compare
        # figures only between runs whose machine was about as fast and as undisturbed.
        "machine_speed_before_each_workload": speeds,
        "options": asdict(options),
        "results": {**to_jsonable(results),
                    **({"scale": {system: asdict(r) for system, r in scale_results.items()}}
                       if scale_results else {})},
        "errors": errors,
        "skipped": skipped,
        "table": table,
        "memory_table": memory,
        "metrics_cost_table": cost_table,
        "failover_table": failover_table,
        "scale_table": scale_table,
        "partitions_table": partitions_table,
    }
    stable = Path(options.output) if options.output else bench_root / "bench-results.json"
    write_json([bench_root / f"results-{stamp}.json", stable], document)
    say(f"results: {stable} and {bench_root / f'results-{stamp}.json'}; logs: {log_root}")
    return 1 if errors else 0
