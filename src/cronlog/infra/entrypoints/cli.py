"""The `cronlog` command: process roles, the local stack, and a gRPC client."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
from pathlib import Path

CLIENT_COMMANDS = ("jobs", "runs", "preview")


def _parser() -> argparse.ArgumentParser:
    from cronlog.infra.entrypoints.client import add_client_commands, add_client_options

    parser = argparse.ArgumentParser(prog="cronlog", description=__doc__)
    add_client_options(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True)
    for role in ("api", "scheduler", "worker", "projector"):
        sub.add_parser(role, help=f"run the {role} process (configured by CRONLOG_* variables)")
    sub.add_parser("provision", help="create topics and schemas on the configured servers")
    sub.add_parser("dev", help="start the servers and every process on this machine")
    stack = sub.add_parser("stack", help="start or stop only the local servers")
    stack.add_argument("action", choices=["up", "down"])
    audit = sub.add_parser("audit", help="read a job's history from the Kafka log")
    audit_sub = audit.add_subparsers(dest="what", required=True)
    audit_job = audit_sub.add_parser("job", help="a job's event timeline")
    audit_job.add_argument("job_id")
    audit_job.add_argument("--as-of", help="also rebuild the job as it was at this instant")
    sub.add_parser("replay", help="rebuild the projections from the log and compare them")
    bench = sub.add_parser("bench", help="burst and steady workloads on cronlog and pgqueuer, "
                                         "on servers of its own (docs/benchmarks.md)")
    from cronlog.infra.bench.options import add_arguments as add_bench_arguments

    add_bench_arguments(bench)
    add_client_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # `kill -USR1 <pid>` prints every thread's stack: how to see where a process is stuck.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.basicConfig(level=os.environ.get("CRONLOG_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    state_root = Path(os.environ.get("CRONLOG_STATE_DIR", ".cronlog"))
    if args.command in CLIENT_COMMANDS:
        from cronlog.infra.entrypoints.client import run_client

        return run_client(args)
    if args.command == "dev":
        from cronlog.infra.entrypoints.dev import run_dev

        run_dev(state_root)
        return 0
    if args.command == "bench":
        from cronlog.infra.bench.options import from_namespace
        from cronlog.infra.bench.runner import run_bench

        return run_bench(from_namespace(args), state_root)
    if args.command == "stack":
        from cronlog.infra.stack.local_stack import RUN_PORTS, LocalStack

        stack = LocalStack(state_root / "run", RUN_PORTS)
        if args.action == "up":
            stack.start()
            print(f"Kafka {stack.kafka.bootstrap}, Postgres {stack.postgres.dsn}, "
                  f"ClickHouse 127.0.0.1:{RUN_PORTS.clickhouse_tcp}")
        else:
            stack.stop()
        return 0

    from cronlog.infra.config import settings_from_env

    settings = settings_from_env()
    if args.command == "audit":
        from cronlog.infra.entrypoints.audit import run_audit

        return run_audit(settings, args.job_id, args.as_of)
    if args.command == "replay":
        from cronlog.infra.entrypoints.replay import run_replay

        return run_replay(settings)
    if args.command == "provision":
        from cronlog.infra.provision import provision

        provision(settings)
        return 0
    from cronlog.infra.entrypoints import processes

    runner = {"api": processes.run_api, "scheduler": processes.run_scheduler,
              "worker": processes.run_worker, "projector": processes.run_projector}
    runner[args.command](settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
