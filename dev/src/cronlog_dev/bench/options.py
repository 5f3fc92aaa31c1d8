"""The options of `cronlog-dev bench`; defaults are the issue's production-like numbers."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

WORKLOADS = ("burst", "steady", "takeover", "metrics-cost", "failover", "scale", "partitions")
# metrics-cost is asked for by name: it repeats the steady workload 2 x pairs times; so is
# failover (issue 19): over four minutes of steady load.
DEFAULT_WORKLOADS = ("burst", "steady", "takeover")
SYSTEMS = ("cronlog", "pgqueuer")


@dataclass(frozen=True)
class BenchOptions:
    burst_jobs: int = 100_000
    steady_rate: int = 3_500
    steady_seconds: int = 30
    # How long after the due second (burst) or the window's end (steady) runs may still
    # start and count; whatever has not started by then is reported as not started.
    max_wait: float = 120.0
    # The longest lead between starting to create a workload's jobs and their due time.
    max_create: float = 900.0
    workloads: tuple[str, ...] = DEFAULT_WORKLOADS
    systems: tuple[str, ...] = SYSTEMS
    worker_slots: int = 64
    # cronlog processes: schedulers share the partitions, workers share the dispatches.
    # Two of each keep both cores busy while one process waits on Kafka or Postgres.
    schedulers: int = 2
    workers: int = 2
    partitions: int = 8
    # The schedulers' lookahead; 0 keeps the service's default (CRONLOG_LOOKAHEAD_MS).
    lookahead_ms: int = 0
    # The schedulers' lookahead for jobs whose runs are a minute or more apart; None keeps
    # the service's default (CRONLOG_SPARSE_LOOKAHEAD_MS), 0 turns it off.
    sparse_lookahead_ms: int | None = None
    pgq_batch_size: int = 100
    # Seconds of an unmeasured steady load (at WARM_UP_RATE) through the fresh servers
    # before any measured workload; 0 skips it. A fresh Kafka's JIT compiler alone took 12
    # CPU-seconds of the first minute and a half, while a measured window was running.
    warm_up_seconds: int = 30
    # Empty: <state folder>/bench/bench-results.json, the path the docs point to.
    output: str = ""
    # The takeover workload: its partition counts, and the jobs in the log at each (one
    # count for all, or one per partition count).
    takeover_partitions: tuple[int, ...] = (8, 1024)
    takeover_jobs: tuple[int, ...] = (1000, 10_000)
    # The metrics-cost workload: steady runs without and with metrics, this many times each.
    metrics_cost_pairs: int = 2
    # The failover workload: runs/s of its every-second jobs (the brief's peak; a shared
    # 2-core machine keeps up with less), and the seconds of fire times judged on each
    # side of the kill and of the added scheduler.
    failover_rate: int = 3_500
    failover_window: int = 30
    # The schedulers' group session timeout (CRONLOG_OWNER_SESSION_TIMEOUT_MS) in the
    # failover workload; 0 keeps the service's default.
    owner_session_timeout_ms: int = 0
    # The scale workload (issue 19): jobs registered through the api, how many of them fire
    # in its top-of-the-hour burst, and its deployment's own partition count.
    scale_jobs: int = 1_000_000
    scale_burst_jobs: int = 100_000
    scale_partitions: int = 1024
    # Its Kafka partitions (0: partitions_figures.default_kafka, 64 for 1,024).
    scale_kafka_partitions: int = 0
    # How long after T the scale workload's burst runs may still start and count, on both
    # systems. Longer than max_wait: at 1,024 partitions this machine does not keep up
    # with the every-minute jobs, and the burst queues behind them (docs/benchmarks.md).
    scale_max_wait: float = 600.0
    # The partitions workload (issue 34, item 5): its layouts' logical partition counts, the
    # Kafka partitions of each (empty: partitions_figures.default_kafka of each), and the
    # same load at each: every-minute jobs making steady_rate runs/s over `seconds`, and a
    # burst of one-off jobs due at one instant in the middle of it.
    partitions_layouts: tuple[int, ...] = (8, 64, 1024)
    partitions_kafka: tuple[int, ...] = ()
    partitions_burst_jobs: int = 20_000
    partitions_steady_rate: int = 100
    partitions_seconds: int = 120
    # The schedulers' CRONLOG_OWNER_BATCH in every cronlog workload; 0: the service's.
    owner_batch: int = 0
    # librdkafka settings for every cronlog client (CRONLOG_KAFKA_CONFIG), checked as the
    # service checks them.
    kafka_config: tuple[tuple[str, str], ...] = ()


def _csv(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(dict.fromkeys(i.strip() for i in text.split(",") if i.strip()))
        unknown = [i for i in items if i not in allowed]
        if unknown or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}")
        return items
    return parse


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def _int_list(minimum: int) -> Callable[[str], tuple[int, ...]]:
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(i) for i in text.split(",") if i.strip())
        except ValueError:
            raise argparse.ArgumentTypeError("comma-separated whole numbers") from None
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(f"comma-separated whole numbers, each at least "
                                             f"{minimum}")
        return values
    return parse


def takeover_plan(partitions: tuple[int, ...], jobs: tuple[int, ...]
                  ) -> tuple[tuple[int, int], ...]:
    """(partition count, jobs in the log) for each takeover measurement."""
    if len(jobs) == 1:
        jobs = jobs * len(partitions)
    if len(jobs) != len(partitions):
        raise ValueError(f"--takeover-jobs: give one count, or one for each of the "
                         f"{len(partitions)} --takeover-partitions counts (got {len(jobs)})")
    return tuple(zip(partitions, jobs, strict=True))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = BenchOptions()
    parser.add_argument("--burst-jobs", type=_positive_int, default=d.burst_jobs,
                        help="one-off jobs all due at the same second (default %(default)s)")
    parser.add_argument("--steady-rate", type=_positive_int, default=d.steady_rate,
                        help="runs per second from every-second cron jobs (default %(default)s)")
    parser.add_argument("--steady-seconds", type=_positive_int, default=d.steady_seconds,
                        help="length of the steady window (default %(default)s)")
    parser.add_argument("--max-wait", type=_positive_float, default=d.max_wait,
                        help="seconds after the burst second / steady window that runs may "
                             "still start (default %(default)s)")
    parser.add_argument("--max-create", type=_positive_float, default=d.max_create,
                        help="longest lead for creating a workload's jobs (default %(default)s)")
    parser.add_argument("--workloads", type=_csv(WORKLOADS), default=d.workloads,
                        help="comma-separated: burst,steady,takeover,metrics-cost,failover,"
                             "scale,partitions (default burst,steady,takeover)")
    parser.add_argument("--systems", type=_csv(SYSTEMS), default=d.systems,
                        help="comma-separated: cronlog,pgqueuer")
    parser.add_argument("--worker-slots", type=_positive_int, default=d.worker_slots,
                        help="concurrent handlers of the cronlog worker (default %(default)s)")
    parser.add_argument("--schedulers", type=_positive_int, default=d.schedulers,
                        help="cronlog scheduler processes (default %(default)s)")
    parser.add_argument("--workers", type=_positive_int, default=d.workers,
                        help="cronlog worker processes (default %(default)s)")
    parser.add_argument("--partitions", type=_positive_int, default=d.partitions,
                        help="partitions of cronlog's job-keyed topics (default %(default)s)")
    parser.add_argument("--lookahead-ms", type=_positive_int, default=None,
                        help="the schedulers' lookahead (default: the service's, "
                             "CRONLOG_LOOKAHEAD_MS)")
    parser.add_argument("--sparse-lookahead-ms", type=int, default=None,
                        help="the schedulers' lookahead for one-off jobs and jobs a minute or "
                             "more apart (default: the service's, CRONLOG_SPARSE_LOOKAHEAD_MS; "
                             "0 turns it off)")
    parser.add_argument("--warm-up-seconds", type=int, default=d.warm_up_seconds,
                        help="seconds of unmeasured load through the fresh servers before "
                             "measuring (default %(default)s; 0 skips it)")
    parser.add_argument("--pgq-batch-size", type=_positive_int, default=d.pgq_batch_size,
                        help="pgqueuer dequeue batch size (default %(default)s)")
    parser.add_argument("--takeover-partitions", type=_int_list(1),
                        default=d.takeover_partitions,
                        help="partition counts of the takeover workload (default 8,1024)")
    parser.add_argument("--takeover-jobs", type=_int_list(0), default=d.takeover_jobs,
                        help="jobs in the log before the takeovers: one count for all, or one "
                             "per --takeover-partitions count (default 1000,10000)")
    parser.add_argument("--metrics-cost-pairs", type=_positive_int,
                        default=d.metrics_cost_pairs,
                        help="metrics-cost: steady runs without, then with metrics, this many "
                             "times (default %(default)s)")
    parser.add_argument("--failover-rate", type=_positive_int, default=d.failover_rate,
                        help="failover: runs/s of every-second jobs while one of three "
                             "schedulers is killed and a fourth added (default %(default)s)")
    parser.add_argument("--failover-window", type=_positive_int, default=d.failover_window,
                        help="failover: seconds of fire times judged before and after each "
                             "event (default %(default)s)")
    parser.add_argument("--owner-session-timeout-ms", type=_positive_int,
                        help="failover: the schedulers' group session timeout "
                             "(CRONLOG_OWNER_SESSION_TIMEOUT_MS; default the service's)")
    parser.add_argument("--scale-jobs", type=_positive_int, default=d.scale_jobs,
                        help="scale: jobs created through the api (default %(default)s)")
    parser.add_argument("--scale-burst-jobs", type=_positive_int, default=d.scale_burst_jobs,
                        help="scale: of those, jobs in the top-of-the-hour burst "
                             "(default %(default)s)")
    parser.add_argument("--scale-partitions", type=_positive_int, default=d.scale_partitions,
                        help="scale: logical partitions of its deployment (default %(default)s)")
    parser.add_argument("--scale-kafka-partitions", type=_positive_int, default=None,
                        help="scale: Kafka partitions of its deployment, dividing "
                             "--scale-partitions (default: L/16, at least 8: 64 for 1,024)")
    parser.add_argument("--scale-max-wait", type=_positive_float, default=d.scale_max_wait,
                        help="scale: how long after T the burst's runs may still start and "
                             "count, on both systems (default %(default)s)")
    parser.add_argument("--partitions-layouts", type=_int_list(1), default=d.partitions_layouts,
                        help="partitions: logical partition counts, measured in turn "
                             "(default 8,64,1024)")
    parser.add_argument("--partitions-kafka", type=_int_list(1), default=d.partitions_kafka,
                        help="partitions: Kafka partitions of each layout, one per "
                             "--partitions-layouts count, each dividing it (default: L/16, "
                             "at least 8: 8,8,64)")
    parser.add_argument("--partitions-burst-jobs", type=_positive_int,
                        default=d.partitions_burst_jobs,
                        help="partitions: one-off jobs due at one instant amid the steady "
                             "load (default %(default)s)")
    parser.add_argument("--partitions-steady-rate", type=_positive_int,
                        default=d.partitions_steady_rate,
                        help="partitions: runs/s of every-minute jobs, each at its own second "
                             "(rate x 60 jobs; default %(default)s)")
    parser.add_argument("--partitions-seconds", type=_positive_int,
                        default=d.partitions_seconds,
                        help="partitions: seconds of steady fire times measured at each layout, "
                             "at least 60 (default %(default)s)")
    parser.add_argument("--owner-batch", type=_positive_int, default=None,
                        help="the schedulers' CRONLOG_OWNER_BATCH in every cronlog workload: "
                             "inbox messages and due jobs per owner transaction (default the "
                             "service's)")
    parser.add_argument("--kafka-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka setting for every cronlog client, as "
                             "CRONLOG_KAFKA_CONFIG takes it (repeat for more)")
    parser.add_argument("--output", default=d.output,
                        help="JSON file of the latest results "
                             "(default .cronlog/bench/bench-results.json)")


def _kafka_config(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    from cronlog.infra.config import ConfigError
    from cronlog.infra.config_connections import kafka_config_from_env

    try:
        return kafka_config_from_env({"CRONLOG_KAFKA_CONFIG": "\n".join(pairs)})
    except ConfigError as exc:
        raise SystemExit(f"--kafka-config: {exc}") from None


def from_namespace(args: argparse.Namespace) -> BenchOptions:
    options = BenchOptions(
        burst_jobs=args.burst_jobs, steady_rate=args.steady_rate,
        steady_seconds=args.steady_seconds, max_wait=args.max_wait,
        max_create=args.max_create, workloads=tuple(args.workloads),
        systems=tuple(args.systems), worker_slots=args.worker_slots,
        schedulers=args.schedulers, workers=args.workers, partitions=args.partitions,
        lookahead_ms=args.lookahead_ms or 0,
        sparse_lookahead_ms=(None if args.sparse_lookahead_ms is None
                             else max(0, args.sparse_lookahead_ms)),
        pgq_batch_size=args.pgq_batch_size,
        warm_up_seconds=max(0, args.warm_up_seconds), output=args.output,
        takeover_partitions=tuple(args.takeover_partitions),
        takeover_jobs=tuple(args.takeover_jobs),
        metrics_cost_pairs=args.metrics_cost_pairs,
        failover_rate=args.failover_rate, failover_window=args.failover_window,
        owner_session_timeout_ms=args.owner_session_timeout_ms or 0,
        scale_jobs=args.scale_jobs, scale_burst_jobs=args.scale_burst_jobs,
        scale_partitions=args.scale_partitions, scale_max_wait=args.scale_max_wait,
        scale_kafka_partitions=args.scale_kafka_partitions or 0,
        partitions_layouts=tuple(args.partitions_layouts),
        partitions_kafka=tuple(args.partitions_kafka),
        partitions_burst_jobs=args.partitions_burst_jobs,
        partitions_steady_rate=args.partitions_steady_rate,
        partitions_seconds=args.partitions_seconds,
        owner_batch=args.owner_batch or 0,
        kafka_config=_kafka_config(args.kafka_config))
    try:
        takeover_plan(options.takeover_partitions, options.takeover_jobs)
        if "scale" in options.workloads:
            from cronlog_dev.bench.scale_figures import job_mix
            job_mix(options.scale_jobs, options.scale_burst_jobs)
        if "partitions" in options.workloads:
            from cronlog_dev.bench.partitions_figures import check_seconds, layouts
            layouts(options.partitions_layouts, options.partitions_kafka)
            check_seconds(options.partitions_seconds)
    except ValueError as exc:
        # Told like argparse's own errors, before anything starts.
        raise SystemExit(f"cronlog-dev bench: error: {exc}") from None
    return options
