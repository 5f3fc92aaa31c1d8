"""The `cronlog calendars` commands and the excluded-days options of `jobs create/update` and
`preview` (issue 20, docs/calendars.md)."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence

from google.protobuf.message import Message

from cronlog.client import CronlogClient
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import Exclusions
from cronlog.v1 import job_service_pb2 as pb

EXCLUDE_HELP = ("a local day the job does not fire on, YYYY-MM-DD, or an inclusive range "
                "YYYY-MM-DD..YYYY-MM-DD; repeat for more (up to 1000)")


class CalendarUsageError(ValueError):
    """A command-line value that cannot become a calendar request (exit 2, like UsageError)."""


def exclusion_texts(values: Sequence[str] | None, option: str = "--exclude") -> list[str]:
    """The --exclude values as given, after checking them here so a typo is a usage error
    before anything is sent (the api checks them again)."""
    texts = [v.strip() for v in values or () if v.strip()]
    try:
        Exclusions.parse(texts, option)
    except InvalidSpec as exc:
        raise CalendarUsageError(str(exc)) from None
    return texts


def add_exclusion_options(parser: argparse.ArgumentParser, *, changing: bool) -> None:
    """--calendar and --exclude (jobs create/update, preview); on update also
    --no-exclusions, since --exclude replaces the list and cannot empty it."""
    parser.add_argument("--calendar", metavar="NAME",
                        help="the tenant's calendar whose excluded days apply too"
                             + ('; "" for none' if changing else ""))
    days = parser.add_mutually_exclusive_group() if changing else parser
    days.add_argument("--exclude", action="append", metavar="DATE[..DATE]", help=EXCLUDE_HELP
                      + ("; replaces the job's list" if changing else ""))
    if changing:
        days.add_argument("--no-exclusions", action="store_true",
                          help="drop the job's own excluded days")


def apply_exclusion_options(args: argparse.Namespace, spec: pb.JobSpec) -> None:
    """The options onto the spec. Switching a job to --after drops its excluded days and
    calendar unless given again (and then refused by the api): a dependent job has no fire
    times to exclude."""
    if args.after:
        spec.ClearField("exclusions")
        spec.ClearField("calendar")
    if getattr(args, "no_exclusions", False):
        if args.exclude:
            raise CalendarUsageError("--exclude and --no-exclusions: give one of them")
        spec.ClearField("exclusions")
    if args.exclude:
        spec.ClearField("exclusions")
        spec.exclusions.extend(exclusion_texts(args.exclude))
    if args.calendar is not None:
        spec.calendar = args.calendar


def add_preview_options(parser: argparse.ArgumentParser) -> None:
    add_exclusion_options(parser, changing=False)
    parser.add_argument("--tenant", default="",
                        help="with --calendar: whose calendar (default: the token's tenant)")


def preview_request_options(args: argparse.Namespace, request: pb.PreviewScheduleRequest
                            ) -> None:
    request.exclusions.extend(exclusion_texts(args.exclude))
    request.calendar = args.calendar or ""
    request.tenant = args.tenant


def add_calendar_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                          common: argparse.ArgumentParser) -> None:
    calendars = sub.add_parser("calendars", parents=[common],
                               help="named sets of excluded days that jobs share"
                               ).add_subparsers(dest="action", required=True)
    tenant = argparse.ArgumentParser(add_help=False)
    tenant.add_argument("--tenant", default="",
                        help="the owning tenant (default: the token's tenant; required "
                             "when the api runs without tokens)")
    create = calendars.add_parser("create", parents=[common, tenant], help="create a calendar")
    create.add_argument("name")
    create.add_argument("--description", default="")
    create.add_argument("--exclude", action="append", metavar="DATE[..DATE]",
                        help=EXCLUDE_HELP)
    create.add_argument("--request-id", help="defaults to a new UUID")
    update = calendars.add_parser(
        "update", parents=[common, tenant],
        help="replace a calendar's excluded days (and description); the jobs on it follow")
    update.add_argument("name")
    update.add_argument("--description", default=None,
                        help="a new description (default: keep the current one)")
    days = update.add_mutually_exclusive_group()
    days.add_argument("--exclude", action="append", metavar="DATE[..DATE]",
                      help=EXCLUDE_HELP + "; replaces the calendar's list")
    days.add_argument("--no-exclusions", action="store_true", help="empty the calendar's list")
    update.add_argument("--expected-version", type=int, default=None, metavar="N",
                        help="refuse the change unless the calendar is at version N (default: "
                             "the version just read; 0 applies it whatever the version)")
    update.add_argument("--request-id", help="defaults to a new UUID")
    get = calendars.add_parser("get", parents=[common, tenant], help="show one calendar")
    get.add_argument("name")
    lst = calendars.add_parser("list", parents=[common, tenant],
                               help="list the tenant's calendars by name")
    lst.add_argument("--page-size", type=int, default=100)
    lst.add_argument("--page-token", default="")


def check_update_options(args: argparse.Namespace) -> None:
    if args.no_exclusions and args.exclude:
        raise CalendarUsageError("--exclude and --no-exclusions: give one of them")
    if not args.no_exclusions and not args.exclude and args.description is None:
        raise CalendarUsageError("nothing to change: give --exclude, --no-exclusions or "
                                 "--description")
    exclusion_texts(args.exclude)


def update_calendar_request(args: argparse.Namespace,
                            current: pb.Calendar) -> pb.UpdateCalendarRequest:
    """The options given on top of the calendar as read, at the version read."""
    check_update_options(args)
    exclusions = ([] if args.no_exclusions else exclusion_texts(args.exclude) if args.exclude
                  else list(current.exclusions))
    expected = current.version if args.expected_version is None else args.expected_version
    return pb.UpdateCalendarRequest(
        request_id=str(args.request_id or uuid.uuid4()), tenant=args.tenant, name=args.name,
        description=current.description if args.description is None else args.description,
        exclusions=exclusions, expected_version=expected)


def calendars_command(client: CronlogClient, args: argparse.Namespace) -> Message:
    if args.action == "create":
        return pb.CreateCalendarResponse(calendar=client.create_calendar(
            args.tenant, args.name, description=args.description,
            exclusions=exclusion_texts(args.exclude), request_id=args.request_id))
    if args.action == "update":
        check_update_options(args)
        update = update_calendar_request(args, client.get_calendar(args.tenant, args.name))
        return pb.UpdateCalendarResponse(calendar=client.update_calendar(
            update.tenant, update.name, description=update.description,
            exclusions=update.exclusions, expected_version=update.expected_version,
            request_id=update.request_id))
    if args.action == "get":
        return pb.GetCalendarResponse(calendar=client.get_calendar(args.tenant, args.name))
    page = client.list_calendars(args.tenant, args.page_size, args.page_token)
    return pb.ListCalendarsResponse(calendars=page.items, next_page_token=page.next_page_token)
