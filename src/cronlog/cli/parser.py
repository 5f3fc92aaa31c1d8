"""The client commands' options: `cronlog jobs|runs|preview|calendars|channels|dead-letters ...`
(argparse)."""

from __future__ import annotations

import argparse
import os

from cronlog.cli.alerts import add_alert_commands
from cronlog.cli.calendars import add_calendar_commands, add_exclusion_options, add_preview_options
from cronlog.cli.channels import add_channel_commands
from cronlog.cli.dead_letters import add_dead_letter_commands
from cronlog.cli.history import add_history_commands
from cronlog.cli.importing import add_import_command
from cronlog.cli.job_filters import add_job_filter_options
from cronlog.cli.job_spec import CONDITIONS, MISFIRE, OVERLAP
from cronlog.cli.notify_options import add_notify_options
from cronlog.cli.output import OUTPUT_FORMATS

DEFAULT_ADDRESS = "127.0.0.1:50051"
RUN_STATUSES = ["", "scheduled", "running", "succeeded", "failed", "cancelled", "missed",
                "skipped", "dead_lettered"]


def _spec_options(parser: argparse.ArgumentParser, creating: bool) -> None:
    parser.add_argument("--spec-json", help="a whole JobSpec as protobuf JSON (a file path or "
                                            "the JSON itself); the options below override it")
    parser.add_argument("--name", required=False)
    parser.add_argument("--tenant")
    parser.add_argument("--handler")
    parser.add_argument("--queue", default="default" if creating else None)
    parser.add_argument("--payload", help="handler input (UTF-8 text)")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--cron", help="5 fields, 6 with seconds first, or @hourly etc.")
    when.add_argument("--at", help="ISO-8601 instant of a one-off job, with its offset")
    when.add_argument("--every", metavar="DURATION",
                      help="an interval job: every 90s, 15m, 1h30m, 1d (1 s to 366 days) of "
                           "elapsed time, from --start-at (or on the grid from the Unix epoch)")
    when.add_argument("--after", action="append", metavar="JOB_ID[,JOB_ID]",
                      help="run after these jobs' runs end instead of on a schedule (up to "
                           "16 jobs of the same tenant; repeat or separate with commas)")
    parser.add_argument("--on", dest="on_condition", choices=sorted(CONDITIONS),
                        help="with --after: which upstream ends count (default success)")
    parser.add_argument("--wait-window", metavar="DURATION",
                        help="with --after: how long the first upstream end of a logical "
                             "time waits for the others, e.g. 90s, 15m, 3h, 1d (default 1h)")
    parser.add_argument("--time-zone")
    parser.add_argument("--start-at", help="ISO-8601: no fire time before this")
    parser.add_argument("--end-at", help="ISO-8601: no fire time after this")
    parser.add_argument("--timeout-seconds", type=float)
    parser.add_argument("--heartbeat-timeout-seconds", type=float)
    parser.add_argument("--spread-seconds", type=float)
    parser.add_argument("--start-timeout-seconds", type=float,
                        help="an attempt no worker starts within this long after its time is "
                             "lost and retried (default: the scheduler's, 5 min)")
    parser.add_argument("--max-attempts", type=int)
    parser.add_argument("--initial-backoff-seconds", type=float)
    parser.add_argument("--max-backoff-seconds", type=float)
    parser.add_argument("--backoff-coefficient", type=float)
    parser.add_argument("--jitter", type=float, help="0 (none) to 1 (full jitter)")
    parser.add_argument("--non-retryable", action="append", metavar="ERROR_TYPE")
    parser.add_argument("--misfire-policy", choices=sorted(MISFIRE))
    parser.add_argument("--overlap-policy", choices=sorted(OVERLAP))
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--request-id", help="defaults to a new UUID")
    add_exclusion_options(parser, changing=not creating)
    add_notify_options(parser, changing=not creating)


def add_client_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """Options every client command takes, before the command or after it.

    Only the top level has defaults: a subcommand's default would overwrite what was given
    before the subcommand (argparse copies a subparser's whole namespace over its parent's).
    """
    address = os.environ.get("CRONLOG_GRPC_ADDRESS", DEFAULT_ADDRESS)
    parser.add_argument("--address", default=address if top_level else argparse.SUPPRESS,
                        help="the api's gRPC address (client commands; default "
                             f"$CRONLOG_GRPC_ADDRESS or {DEFAULT_ADDRESS})")
    parser.add_argument("-o", "--output", dest="output_format", choices=OUTPUT_FORMATS,
                        default="json" if top_level else argparse.SUPPRESS,
                        help="json (the default, for scripts) or table (for people)")


def _cascade_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cascade", action="store_true",
                        help="the job's dependents follow these runs, level after level, as "
                             "they follow its scheduled runs (the request id is the chain's "
                             "cascade)")


def add_client_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    add_client_options(common, top_level=False)
    jobs = sub.add_parser("jobs", parents=[common], help="create, change and read jobs"
                          ).add_subparsers(dest="action", required=True)
    _spec_options(jobs.add_parser("create", parents=[common], help="register a job"),
                  creating=True)
    add_import_command(jobs, common)
    update = jobs.add_parser("update", parents=[common],
                             help="change a job's spec (options not given keep their current "
                                  "value)")
    update.add_argument("job_id")
    update.add_argument("--expected-version", type=int, default=None, metavar="N",
                        help="refuse the change unless the job is at version N (default: the "
                             "version just read, so a change made since is not overwritten; "
                             "0 applies it whatever the version)")
    _spec_options(update, creating=False)
    get = jobs.add_parser("get", parents=[common], help="show one job")
    get.add_argument("job_id")
    for action in ("pause", "resume", "delete", "trigger"):
        change = jobs.add_parser(action, parents=[common], help=f"{action} a job")
        change.add_argument("job_id")
        change.add_argument("--request-id", help="defaults to a new UUID")
        if action == "trigger":
            _cascade_option(change)
    restore = jobs.add_parser(
        "restore", parents=[common],
        help="give a job the spec it had at an earlier version, bringing it back if deleted")
    restore.add_argument("job_id")
    restore.add_argument("--version", type=int, required=True, metavar="N",
                         help="the version whose spec it gets back (`cronlog audit job` "
                              "lists them)")
    restore.add_argument("--skip-missed", action="store_true",
                         help="a deleted job goes on from now: its fire times since the "
                              "delete are not run (default: its misfire policy decides)")
    restore.add_argument("--request-id", help="defaults to a new UUID")
    backfill = jobs.add_parser("backfill", parents=[common],
                               help="run the fire times of a past interval")
    backfill.add_argument("job_id")
    backfill.add_argument("--from", dest="after", required=True,
                          help="ISO-8601: fire times after this")
    backfill.add_argument("--until", required=True, help="ISO-8601: ...and not after this")
    backfill.add_argument("--request-id", help="defaults to a new UUID")
    _cascade_option(backfill)
    lst = jobs.add_parser("list", parents=[common], help="list jobs")
    lst.add_argument("--tenant", default="")
    lst.add_argument("--page-size", type=int, default=100)
    lst.add_argument("--page-token", default="")
    add_job_filter_options(lst)

    runs = sub.add_parser("runs", parents=[common], help="run history, cancellation and re-drive"
                          ).add_subparsers(dest="action", required=True)
    rlist = runs.add_parser("list", parents=[common], help="list runs, newest first")
    rlist.add_argument("--job", default="")
    rlist.add_argument("--tenant", default="")
    rlist.add_argument("--status", default="", choices=RUN_STATUSES)
    rlist.add_argument("--scheduled-after", help="ISO-8601")
    rlist.add_argument("--scheduled-before", help="ISO-8601")
    rlist.add_argument("--page-size", type=int, default=20)
    rlist.add_argument("--page-token", default="")
    rget = runs.add_parser("get", parents=[common], help="show one run with its attempts")
    rget.add_argument("run_id")
    wait = runs.add_parser(
        "wait", parents=[common],
        help="wait until a run ends, then show it; exit 0 if it succeeded, 3 if it ended "
             "otherwise, 4 if it had not ended within --timeout")
    wait.add_argument("run_id")
    wait.add_argument("--timeout", type=float, default=60.0,
                      help="seconds to wait, at most 3600 (default 60)")
    wait.add_argument("--poll", type=float, default=0.5,
                      help="seconds between two looks at the run (default 0.5)")
    cancel = runs.add_parser("cancel", parents=[common],
                             help="cancel a run that is waiting or running")
    cancel.add_argument("run_id")
    cancel.add_argument("--request-id", help="defaults to a new UUID")
    redrive = runs.add_parser(
        "redrive", parents=[common],
        help="give a dead-lettered run a new series of attempts under its own run id")
    redrive.add_argument("run_id")
    redrive.add_argument("--request-id", help="defaults to a new UUID; a retry with the same "
                                              "id re-drives once")

    prev = sub.add_parser("preview", parents=[common],
                          help="fire times of a cron expression or an interval, explained")
    prev.add_argument("cron", nargs="?", default="")
    prev.add_argument("--every", metavar="DURATION",
                      help="preview an interval (90s, 15m, 1h30m) instead of a cron expression; "
                           "--start-at is its phase")
    prev.add_argument("--time-zone", default="UTC")
    prev.add_argument("--count", type=int, default=10)
    prev.add_argument("--after", help="ISO-8601 instant (default now)")
    prev.add_argument("--start-at", help="ISO-8601: no fire time before this")
    prev.add_argument("--end-at", help="ISO-8601: no fire time after this")
    add_preview_options(prev)
    add_calendar_commands(sub, common)
    add_history_commands(sub, common)
    add_channel_commands(sub, common)
    add_dead_letter_commands(sub, common)
    add_alert_commands(sub, common)
    workers = sub.add_parser("workers", parents=[common], help="the live workers"
                             ).add_subparsers(dest="action", required=True)
    wlist = workers.add_parser("list", parents=[common],
                               help="workers heard from lately, with their queues and handlers")
    wlist.add_argument("--queue", default="", help="only the workers serving this queue")
