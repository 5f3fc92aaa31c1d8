"""The `cronlog channels` commands (issue 37, docs/alerts.md "Channels"): create, update,
get, delete, rotate-secret, list and test a tenant's alert channels, and their tables.

A webhook channel's signing secret is printed by `create` and `rotate-secret` only (the
api shows it in those answers and never again); keep it where the receiver reads it."""

from __future__ import annotations

import argparse

from google.protobuf.message import Message

from cronlog.cli.tables import ABSENT, instant, table, with_next_page
from cronlog.client import CronlogClient
from cronlog.v1 import job_service_pb2 as pb

CHANNEL_COLUMNS = ("NAME", "KIND", "DESTINATION", "DEFAULT", "ROTATION", "VERSION",
                   "UPDATED", "DESCRIPTION")
CHANNEL_ANSWERS = (pb.UpdateChannelResponse, pb.DeleteChannelResponse, pb.GetChannelResponse)
TEST_COLUMNS = ("DELIVERED", "STATUS", "LATENCY", "DELIVERY ID", "ERROR")
SECRET_ANSWERS = (pb.CreateChannelResponse, pb.RotateChannelSecretResponse)
SECRET_NOTE = ("signing secret (shown this once; cronlog keeps none, rotate-secret makes a "
               "new one):")


class ChannelUsageError(ValueError):
    """Options that cannot become a channel request (exit 2, like UsageError)."""


def add_channel_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                         common: argparse.ArgumentParser) -> None:
    channels = sub.add_parser("channels", parents=[common],
                              help="where the tenant's alerts are delivered: webhooks, "
                                   "Slack, e-mail"
                              ).add_subparsers(dest="action", required=True)
    tenant = argparse.ArgumentParser(add_help=False)
    tenant.add_argument("--tenant", default="",
                        help="the owning tenant (default: the token's tenant; required "
                             "when the api runs without tokens)")
    request = argparse.ArgumentParser(add_help=False)
    request.add_argument("--request-id", help="defaults to a new UUID")
    create = channels.add_parser("create", parents=[common, tenant, request],
                                 help="create a channel (a webhook's secret is shown once)")
    create.add_argument("name")
    create.add_argument("--kind", required=True, choices=("webhook", "slack", "email"))
    _destination_options(create)
    create.add_argument("--description", default="")
    create.add_argument("--default", action="store_true", dest="is_default",
                        help="the channel receives the tenant's tenant-level alerts")
    update = channels.add_parser(
        "update", parents=[common, tenant, request],
        help="change a channel's URL or recipients, description or default flag")
    update.add_argument("name")
    _destination_options(update)
    update.add_argument("--description", default=None,
                        help="a new description (default: keep the current one)")
    flag = update.add_mutually_exclusive_group()
    flag.add_argument("--default", action="store_true", dest="is_default", default=None)
    flag.add_argument("--no-default", action="store_false", dest="is_default")
    update.add_argument("--expected-version", type=int, default=None, metavar="N",
                        help="refuse the change unless the channel is at version N "
                             "(default: the version just read; 0 whatever the version)")
    for action, words in (("get", "show one channel (never its secret)"),
                          ("delete", "delete a channel (creating it again restores it with a new secret)"),
                          ("rotate-secret", "give a channel a new signing secret, shown "
                                            "once; the old one stops signing")):
        parents = [common, tenant] + ([request] if action != "get" else [])
        channels.add_parser(action, parents=parents, help=words).add_argument("name")
    test = channels.add_parser("test", parents=[common, tenant],
                               help="send one test alert to a channel now (exit 1 when it "
                                    "is not delivered)")
    test.add_argument("name")
    lst = channels.add_parser("list", parents=[common, tenant],
                              help="list the tenant's channels by name")
    lst.add_argument("--page-size", type=int, default=100)
    lst.add_argument("--page-token", default="")


def _destination_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None,
                        help="a webhook's or Slack incoming webhook's URL (https)")
    parser.add_argument("--recipient", action="append", metavar="ADDRESS",
                        help="an e-mail channel's address; repeat for more (up to 10)")


def _update(client: CronlogClient, args: argparse.Namespace) -> Message:
    if (args.url is None and args.recipient is None and args.description is None
            and args.is_default is None):
        raise ChannelUsageError("nothing to change: give --url, --recipient, --description, "
                                "--default or --no-default")
    current = client.get_channel(args.tenant, args.name)
    expected = current.version if args.expected_version is None else args.expected_version
    return pb.UpdateChannelResponse(channel=client.update_channel(
        args.tenant, args.name,
        url=current.url if args.url is None else args.url,
        recipients=list(current.recipients) if args.recipient is None else args.recipient,
        description=current.description if args.description is None else args.description,
        is_default=current.is_default if args.is_default is None else args.is_default,
        expected_version=expected, request_id=args.request_id))


def channels_command(client: CronlogClient, args: argparse.Namespace) -> Message:
    if args.action == "create":
        return client.create_channel(
            args.tenant, args.name, kind=args.kind, url=args.url or "",
            recipients=args.recipient or (), description=args.description,
            is_default=args.is_default, request_id=args.request_id)
    if args.action == "update":
        return _update(client, args)
    if args.action == "get":
        return pb.GetChannelResponse(channel=client.get_channel(args.tenant, args.name))
    if args.action == "delete":
        return pb.DeleteChannelResponse(channel=client.delete_channel(
            args.tenant, args.name, request_id=args.request_id))
    if args.action == "rotate-secret":
        return client.rotate_channel_secret(args.tenant, args.name,
                                            request_id=args.request_id)
    if args.action == "test":
        return client.test_channel(args.tenant, args.name)
    page = client.list_channels(args.tenant, args.page_size, args.page_token)
    return pb.ListChannelsResponse(channels=page.items, next_page_token=page.next_page_token)


def _row(channel: pb.Channel) -> tuple[str, ...]:
    return (channel.name, channel.kind, channel.url or ", ".join(channel.recipients) or ABSENT,
            "yes" if channel.is_default else "no", str(channel.secret_rotation),
            str(channel.version), instant(channel.updated_at),
            channel.description or ABSENT)


def _test_row(answer: pb.TestChannelResponse) -> tuple[str, ...]:
    return ("yes" if answer.delivered else "no", str(answer.status_code or ABSENT),
            f"{answer.latency_ms} ms", answer.delivery_id, answer.error or ABSENT)


def channel_table(message: Message) -> str | None:
    """The table of a channel answer; None for any other answer."""
    if isinstance(message, pb.ListChannelsResponse):
        return with_next_page(table(CHANNEL_COLUMNS, map(_row, message.channels)),
                              message.next_page_token)
    if isinstance(message, CHANNEL_ANSWERS):
        return table(CHANNEL_COLUMNS, [_row(message.channel)])
    if isinstance(message, pb.TestChannelResponse):
        return table(TEST_COLUMNS, [_test_row(message)])
    if isinstance(message, SECRET_ANSWERS):
        shown = table(CHANNEL_COLUMNS, [_row(message.channel)])
        if message.signing_secret:
            shown += f"\n\n{SECRET_NOTE}\n{message.signing_secret}"
        return shown
    return None
