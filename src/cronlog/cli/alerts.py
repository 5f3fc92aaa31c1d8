"""`cronlog alerts list` (issue 37, docs/alerts.md "What was delivered"): a page of the
tenant's alert delivery attempts, newest first, and their table."""

from __future__ import annotations

import argparse

from google.protobuf.message import Message

from cronlog.cli.tables import ABSENT, instant, table, with_next_page
from cronlog.client import CronlogClient
from cronlog.v1 import job_service_pb2 as pb

OUTCOMES = ("delivered", "retrying", "failed")
DELIVERY_COLUMNS = ("SENT", "JOB", "KIND", "CHANNEL", "ATTEMPT", "OUTCOME", "STATUS",
                    "LATENCY", "NEXT ATTEMPT", "ERROR")


def add_alert_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                       common: argparse.ArgumentParser) -> None:
    alerts = sub.add_parser("alerts", parents=[common],
                            help="what was delivered of the tenant's alerts"
                            ).add_subparsers(dest="action", required=True)
    lst = alerts.add_parser("list", parents=[common],
                            help="the tenant's delivery attempts, newest first")
    lst.add_argument("--tenant", default="",
                     help="the tenant (default: the token's tenant; required when the api "
                          "runs without tokens)")
    lst.add_argument("--job", default="", metavar="JOB_ID", help="only this job's alerts")
    lst.add_argument("--channel", default="", metavar="NAME", help="only to this channel")
    lst.add_argument("--outcome", default="", choices=OUTCOMES,
                     help="only attempts with this outcome")
    lst.add_argument("--page-size", type=int, default=50, help="1 to 100 (default 50)")
    lst.add_argument("--page-token", default="")


def alerts_command(client: CronlogClient, args: argparse.Namespace) -> Message:
    page = client.list_alert_deliveries(args.tenant, job_id=args.job, channel=args.channel,
                                        outcome=args.outcome, page_size=args.page_size,
                                        page_token=args.page_token)
    return pb.ListAlertDeliveriesResponse(attempts=page.items,
                                          next_page_token=page.next_page_token)


def _row(a: pb.AlertDeliveryAttempt) -> tuple[str, ...]:
    kind = a.kind + (f" (digest of {a.digest_count})" if a.digest_count else "")
    return (instant(a.sent_at), a.job_name or a.job_id, kind,
            f"{a.channel_name} ({a.channel_kind})", str(a.attempt), a.outcome,
            str(a.status_code) if a.status_code else ABSENT, f"{a.latency_ms} ms",
            instant(a.next_attempt_at),
            a.error or ABSENT)


def delivery_table(message: Message) -> str | None:
    """The table of a ListAlertDeliveries answer; None for any other answer."""
    if not isinstance(message, pb.ListAlertDeliveriesResponse):
        return None
    return with_next_page(table(DELIVERY_COLUMNS, map(_row, message.attempts)),
                          message.next_page_token)
