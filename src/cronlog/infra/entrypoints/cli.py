"""The `cronlog` command: process roles, operator commands, and a gRPC client."""

from __future__ import annotations

import argparse
import dataclasses
import faulthandler
import os
import signal
import sys

CLIENT_COMMANDS = ("jobs", "runs", "preview", "calendars", "channels", "workers", "dead-letters",
                   "alerts", "history")


def _parser() -> argparse.ArgumentParser:
    from cronlog.cli.parser import add_client_commands, add_client_options

    parser = argparse.ArgumentParser(
        prog="cronlog", description=__doc__,
        epilog="The local servers, `make run`'s launcher and the benchmark are development "
               "tools: the `cronlog-dev` command of the repository's dev/ package.")
    add_client_options(parser, top_level=True)
    # Read before this parser exists (main); declared here for --help and so it parses.
    parser.add_argument("--env-file", metavar="PATH",
                        help="CRONLOG_* settings (KEY=VALUE lines, e.g. make run's "
                             ".cronlog/run/cronlog.env) for what the environment does not set; "
                             "default $CRONLOG_ENV_FILE")
    sub = parser.add_subparsers(dest="command", required=True)
    for role in ("api", "scheduler", "worker", "projector", "notifier"):
        role_parser = sub.add_parser(
            role, help=f"run the {role} process (configured by CRONLOG_* variables)")
        if role == "worker":
            role_parser.add_argument(
                "--handlers", metavar="MODULE[:ATTR],...",
                help="cronlog.sdk handlers to load besides the installed entry points "
                     "(instead of CRONLOG_WORKER_HANDLERS; docs/handlers.md)")
    sub.add_parser("console", help="run the web console (CRONLOG_CONSOLE_ADDRESS, default "
                                   "127.0.0.1:8080; a client of the api at CRONLOG_GRPC_ADDRESS)")
    provision = sub.add_parser("provision",
                               help="create topics and schemas on the configured servers")
    provision.add_argument("--print", action="store_true", dest="print_only",
                           help="only list the topics as they would be created "
                                "(docs/operations.md), touching no server")
    audit = sub.add_parser("audit", help="read a job's history from the Kafka log")
    audit_sub = audit.add_subparsers(dest="what", required=True)
    audit_job = audit_sub.add_parser("job", help="a job's event timeline")
    audit_job.add_argument("job_id")
    audit_job.add_argument("--as-of", help="also rebuild the job as it was at this instant")
    verify = sub.add_parser(
        "verify", help="prove from the Kafka log that every fire time of a tenant's jobs in "
                       "a window ran exactly once (docs/verify.md); exit 1 on a violation")
    verify.add_argument("--since", required=True,
                        help="the window's start, an ISO-8601 instant with its offset")
    verify.add_argument("--until", help="the window's end (default now); at most 92 days "
                                        "after --since")
    verify.add_argument("--tenant", help="only this tenant's jobs (default every tenant)")
    verify.add_argument("--job", action="append", default=[], metavar="JOB_ID",
                        dest="job_ids", help="only this job (repeatable)")
    verify.add_argument("--settle", metavar="DURATION",
                        help="what should have happened this long before now has: attempts "
                             "ended, fire times fired (default 10m)")
    verify.add_argument("--projections", action="store_true",
                        help="also compare each job's row in PostgreSQL with what its events "
                             "imply (its version, status, next and last fire times)")
    verify.add_argument("--report", metavar="FILE",
                        help="every violation as a JSON line with the events that show it "
                             "(- for standard output, the summary then on standard error)")
    what_if = sub.add_parser(
        "what-if", help="replay a job's real history under a changed spec, in memory: fire "
                        "times added and removed, late, missed, overlapping (docs/verify.md)")
    what_if.add_argument("job_id")
    what_if.add_argument("--spec", required=True, metavar="CHANGES.json",
                         help="the JobSpec fields that change, in protobuf's JSON mapping "
                              "(- for standard input), e.g. {\"cron\": \"0 */2 * * *\"}")
    what_if.add_argument("--since", required=True, help="the window's start (ISO-8601)")
    what_if.add_argument("--until", help="the window's end (default now)")
    what_if.add_argument("--json", action="store_true", dest="emit_json",
                         help="every fire time as one JSON object")
    replay = sub.add_parser("replay", help="rebuild the projections from the log and compare them")
    replay.add_argument("--rebuild", action="store_true",
                        help="rebuild the ClickHouse history from the log within its horizon "
                             "and replace the live tables with it")
    replay.add_argument("--keep", action="store_true",
                        help="keep the rebuilt copies (a Postgres schema and a ClickHouse "
                             "database replay_<tag>) even when they match; by default they "
                             "are dropped then, and kept when they differ")
    sql = sub.add_parser("sql", help="query the run history in ClickHouse, read-only "
                                     "(docs/analytics.md); no QUERY: clickhouse-client")
    sql.add_argument("query", nargs="?", help="one SQL statement (default: an interactive "
                                              "clickhouse-client with the same credentials)")
    sql.add_argument("--format", choices=("tsv", "csv", "json", "table"),
                     help="tsv (with names), csv (with names), json (an object a line) or "
                          "table; default table on a terminal, tsv otherwise")
    add_client_commands(sub)
    return parser


CLICKHOUSE_LAZY_DATES = "CLICKHOUSE_DRIVER_LASY_DATE_LUT"


def prepare_process(role: str = "cli") -> None:
    """What every cronlog command sets up first: stack dumps on demand, and logging
    (CRONLOG_LOG_FORMAT: text, or json lines naming the role)."""
    from cronlog.infra.observability.json_logs import LogFormatError, configure_logging

    # `kill -USR1 <pid>` prints every thread's stack: how to see where a process is stuck.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # clickhouse-driver fills a table of every date from 1900 to 2299 when imported (a
    # quarter of a second of CPU in every api, projector and console start) unless this
    # variable (its own spelling) asks for dates converted when first met; a value that is
    # not a date range leaves none filled in advance. The conversions are the same.
    os.environ.setdefault(CLICKHOUSE_LAZY_DATES, "on-demand")
    try:
        configure_logging(role)
    except LogFormatError as exc:
        raise SystemExit(f"cronlog: {exc}") from None


# How a command ends whose reader stopped reading (`cronlog jobs list | head`): as a
# process killed by SIGPIPE would, the shell's 128 + 13.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # No traceback for a reader that took what it wanted; stdout goes to /dev/null so
        # the flush at exit does not fail again (the recipe of Python's signal docs).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:

    from cronlog.infra.env_file import EnvFileError, fill_from_env_file

    # Once, before anything reads a setting: the parser's defaults and every command's.
    try:
        fill_from_env_file(sys.argv[1:] if argv is None else argv, os.environ)
    except EnvFileError as exc:
        print(f"cronlog: error: {exc}", file=sys.stderr)
        return 2
    args = _parser().parse_args(argv)
    prepare_process(args.command)
    if args.command in CLIENT_COMMANDS:
        from cronlog.cli.commands import run_client

        return run_client(args)

    from cronlog.infra.config_env import settings_from_env
    from cronlog.infra.setting_names import unknown_settings

    settings = settings_from_env()
    for line in unknown_settings(os.environ):
        print(f"cronlog: warning: {line}", file=sys.stderr)
    if args.command == "audit":
        from cronlog.infra.entrypoints.audit import run_audit

        return run_audit(settings, args.job_id, args.as_of)
    if args.command == "verify":
        from cronlog.infra.entrypoints.verify import run_verify

        return run_verify(settings, args.since, args.until, args.settle, args.tenant,
                          args.job_ids, args.report, args.projections)
    if args.command == "what-if":
        from cronlog.infra.entrypoints.what_if import run_what_if

        return run_what_if(settings, args.job_id, args.spec, args.since, args.until,
                           args.emit_json)
    if args.command == "replay":
        from cronlog.infra.entrypoints.replay import run_replay

        return run_replay(settings, rebuild=args.rebuild, keep=args.keep)
    if args.command == "sql":
        from cronlog.infra.entrypoints.sql import run_sql

        return run_sql(settings, args.query, args.format)
    if args.command == "provision":
        from cronlog.infra.provision import run_provision

        return run_provision(settings, args.print_only)
    from cronlog.infra.entrypoints import processes

    if args.command == "worker" and args.handlers is not None:
        from cronlog.infra.config import ConfigError
        from cronlog.infra.config_handlers import worker_handlers_from

        try:
            handlers = worker_handlers_from(args.handlers, "--handlers")
        except ConfigError as exc:
            print(f"cronlog: error: {exc}", file=sys.stderr)
            return 2
        settings = dataclasses.replace(settings, worker_handlers=handlers)
    runner = {"api": processes.run_api, "scheduler": processes.run_scheduler,
              "worker": processes.run_worker, "projector": processes.run_projector,
              "notifier": processes.run_notifier, "console": processes.run_console}
    runner[args.command](settings)
    return 0


if __name__ == "__main__":
    sys.exit(main())
