"""A job's notify rule from the command line (`jobs create` and `jobs update`): which of its
alerts go to which of the tenant's channels (docs/alerts.md). The api checks the values;
here they only become the request's `spec.notify`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta

from cronlog.v1 import job_service_pb2 as pb

KINDS = ("dead_lettered", "failed", "recovered", "missed", "timed_out", "started_late",
         "set_aside")


def add_notify_options(parser: argparse.ArgumentParser, *, changing: bool) -> None:
    """--notify, --notify-on and --notify-late-after; on update also --no-notify, since
    --notify replaces the list and cannot empty it."""
    rule = parser.add_mutually_exclusive_group() if changing else parser
    rule.add_argument("--notify", action="append", metavar="CHANNEL",
                      help="a channel of the tenant that gets the job's alerts (repeat for "
                           "up to 5)" + ("; replaces the job's list" if changing else ""))
    if changing:
        rule.add_argument("--no-notify", action="store_true",
                          help="drop the job's notify rule")
    parser.add_argument("--notify-on", action="append", choices=KINDS, metavar="KIND",
                        help="an alert the job wants (repeat; default dead_lettered): "
                             + ", ".join(KINDS))
    parser.add_argument("--notify-late-after", metavar="DURATION",
                        help="with --notify-on started_late: how late a start is late, "
                             "e.g. 30s, 5m (default 1m)")


def apply_notify_options(args: argparse.Namespace, spec: pb.JobSpec,
                         duration: Callable[[str, str], timedelta]) -> None:
    """The options onto the spec (on an update, onto the job's rule as read): --notify
    replaces the channels, --notify-on the kinds; --no-notify clears the rule."""
    if getattr(args, "no_notify", False):
        spec.ClearField("notify")
        return
    if args.notify:
        spec.notify.ClearField("channels")
        spec.notify.channels.extend(args.notify)
    if args.notify_on:
        spec.notify.ClearField("on")
        spec.notify.on.extend(args.notify_on)
    if args.notify_late_after:
        spec.notify.late_after.FromTimedelta(duration(args.notify_late_after,
                                                      "--notify-late-after"))
