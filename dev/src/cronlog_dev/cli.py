"""The `cronlog-dev` command: the local servers, the whole service on this machine, the
benchmark and the generated docs. Development tools only; the service's own command is `cronlog`."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cronlog.infra.entrypoints.cli import prepare_process


def _parser() -> argparse.ArgumentParser:
    from cronlog_dev.bench.options import add_arguments as add_bench_arguments

    parser = argparse.ArgumentParser(prog="cronlog-dev", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="start the local servers and every cronlog process on this "
                               "machine, until Ctrl-C (what `make run` calls)")
    stack = sub.add_parser("stack", help="start or stop only the local servers")
    stack.add_argument("action", choices=["up", "down"])
    bench = sub.add_parser("bench", help="burst, steady and takeover workloads on cronlog and "
                                         "pgqueuer, on servers of its own (docs/benchmarks.md)")
    add_bench_arguments(bench)
    from cronlog_dev.bench.bulk_create import add_arguments as add_bulk_arguments

    add_bulk_arguments(sub.add_parser(
        "bulk-create", help="jobs/s through the api's CreateJobs, on the servers the CRONLOG_* "
                            "variables name (docs/bulk-import.md)"))
    docs = sub.add_parser("docs", help="render a generated page of docs/ (what `make docs` "
                                       "calls)")
    docs.add_argument("page", choices=["configuration"])
    docs.add_argument("--output", type=Path, default=Path("docs/configuration.md"))
    docs.add_argument("--check", action="store_true",
                      help="only say whether the page is current (exit 1 when not)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    prepare_process()
    state_root = Path(os.environ.get("CRONLOG_STATE_DIR", ".cronlog"))
    if args.command == "run":
        from cronlog_dev.run import run_dev

        run_dev(state_root)
        return 0
    if args.command == "bench":
        from cronlog_dev.bench.options import from_namespace
        from cronlog_dev.bench.runner import run_bench

        return run_bench(from_namespace(args), state_root)
    if args.command == "docs":
        from cronlog_dev.docs import write_configuration

        return write_configuration(args.output, args.check)
    if args.command == "bulk-create":
        from cronlog_dev.bench.bulk_create import run_bulk_create

        return run_bulk_create(args, state_root)
    from cronlog_dev.stack.local_stack import RUN_PORTS, LocalStack

    stack = LocalStack(state_root / "run", RUN_PORTS)
    if args.action == "up":
        stack.start()
        print(f"Kafka {','.join(stack.kafka_addresses)}, Postgres {stack.postgres.dsn}, "
              f"ClickHouse 127.0.0.1:{RUN_PORTS.clickhouse_tcp}")
    else:
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
