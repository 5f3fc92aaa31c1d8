"""`cronlog dead-letters redrive` (issue 37 item 4, docs/lifecycle.md "Re-driving dead
letters"): a tenant's dead letters of a window of fire times, re-driven at most `--limit` a
call, and the table of what became of each."""

from __future__ import annotations

import argparse

from google.protobuf.message import Message

from cronlog.cli.job_spec import instant
from cronlog.cli.tables import instant as shown_instant
from cronlog.cli.tables import table
from cronlog.client import CronlogClient
from cronlog.v1 import job_service_pb2 as pb

DEAD_LETTER_COLUMNS = ("RUN ID", "JOB ID", "SCHEDULED", "OUTCOME", "ERROR")
MORE_NOTE = ("more dead letters in the window: run the command again (with a new request "
             "id) for the next ones")


def add_dead_letter_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                             common: argparse.ArgumentParser) -> None:
    dead = sub.add_parser("dead-letters", parents=[common],
                          help="re-drive a tenant's dead-lettered runs"
                          ).add_subparsers(dest="action", required=True)
    redrive = dead.add_parser(
        "redrive", parents=[common],
        help="give the dead letters of a window of fire times new attempts, as `runs "
             "redrive` does for one (oldest first, at most --limit)")
    redrive.add_argument("--tenant", default="",
                         help="the tenant (default: the token's tenant; required when the "
                              "api runs without tokens)")
    redrive.add_argument("--job", default="", metavar="JOB_ID",
                         help="only this job's dead letters")
    redrive.add_argument("--since", required=True,
                         help="ISO-8601: fire times at or after this")
    redrive.add_argument("--until", help="ISO-8601: fire times before this (default now; at "
                                         "most 31 days after --since)")
    redrive.add_argument("--limit", type=int, default=0,
                         help="at most this many runs, 1 to 100 (default 100)")
    redrive.add_argument("--request-id", help="defaults to a new UUID; a retry with the same "
                                              "id re-drives no run twice")


def dead_letters_command(client: CronlogClient, args: argparse.Namespace) -> Message:
    return client.redrive_dead_letters(
        instant(args.since, "--since"),
        instant(args.until, "--until") if args.until else None,
        tenant=args.tenant, job_id=args.job, limit=args.limit, request_id=args.request_id)


def _outcome(value: pb.RedriveOutcome.ValueType) -> str:
    return pb.RedriveOutcome.Name(value).removeprefix("REDRIVE_OUTCOME_").lower()


def dead_letter_table(message: Message) -> str | None:
    """The table of a RedriveDeadLetters answer; None for any other answer."""
    if not isinstance(message, pb.RedriveDeadLettersResponse):
        return None
    shown = table(DEAD_LETTER_COLUMNS, (
        (r.run_id, r.job_id, shown_instant(r.scheduled_at), _outcome(r.outcome),
         f"{r.error.code}: {r.error.message}" if r.HasField("error") else "")
        for r in message.runs))
    return shown + (f"\n\n{MORE_NOTE}" if message.more else "")
