"""PostgresChannelReads: the api's read-only view of the `channels` table (issue 37).

The channels' owners write the table when they commit; the api reads it for GetChannel,
ListChannels, the tenant's count and the version a command's reply names. Every statement
names the tenant: no read reaches another tenant's channel (invariant 10).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cronlog.commands.api.ports import ChannelView
from cronlog.domain.bounds import CHANNEL_NAME_PATTERN
from cronlog.domain.errors import InvalidSpec
from cronlog.infra.postgres.bounded_pool import BoundedPool

COLUMNS = ("SELECT tenant, name, channel_id, kind, target, recipients, description, "
           "is_default, secret_rotation, version, deleted, created_at, updated_at "
           "FROM channels")
GET_CHANNEL = COLUMNS + " WHERE tenant = %(tenant)s AND name = %(name)s"
# Keyset pagination on the unique (tenant, name): stable while channels are added. A row
# is at most about 27 KB (MAX_TARGET_CHARS, MAX_RECIPIENTS addresses, the description),
# and a page at most 100 of them (channel_rpcs.MAX_PAGE).
LIST_CHANNELS = (COLUMNS + " WHERE tenant = %(tenant)s AND NOT deleted {after} "
                 "ORDER BY name LIMIT %(limit)s")
COUNT_CHANNELS = "SELECT count(*) FROM channels WHERE tenant = %(tenant)s AND NOT deleted"


class InvalidChannelPageToken(InvalidSpec):
    """A page token this service did not hand out."""

    def __init__(self, token: str) -> None:
        super().__init__("page_token", f"{token[:64]!r} is not a token this service gave out")


def encode_page_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def decode_page_token(token: str) -> str:
    try:
        name = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidChannelPageToken(token) from None
    if not CHANNEL_NAME_PATTERN.fullmatch(name):
        raise InvalidChannelPageToken(token)
    return name


def channel_view(row: tuple[Any, ...]) -> ChannelView:
    (tenant, name, channel_id, kind, target, recipients, description, is_default, rotation,
     version, deleted, created_at, updated_at) = row
    return ChannelView(tenant=tenant, name=name, channel_id=channel_id, kind=kind,
                       target=target or "", recipients=tuple(recipients or ()),
                       description=description or "", is_default=bool(is_default),
                       secret_rotation=int(rotation), version=int(version),
                       deleted=bool(deleted), created_at=created_at, updated_at=updated_at)


class PostgresChannelReads:
    def __init__(self, dsn: str) -> None:
        # Every statement bounded in time (byte_pages.configure_reads).
        self._pool = BoundedPool(dsn, max_size=2)

    def close(self) -> None:
        self._pool.close()

    def _rows(self, query: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        return self._pool.rows(query, params, what)

    def channel(self, tenant: str, name: str) -> ChannelView | None:
        rows = self._rows(GET_CHANNEL, {"tenant": tenant, "name": name},
                          f"reading channel {tenant}/{name}")
        return channel_view(rows[0]) if rows else None

    def channels(self, tenant: str, page_size: int,
                 page_token: str | None) -> tuple[list[ChannelView], str | None]:
        """At most page_size live channels in name order; the token is the position after
        the last one returned, when there are more."""
        params: dict[str, Any] = {"tenant": tenant, "limit": page_size + 1}
        after = ""
        if page_token:
            params["after"] = decode_page_token(page_token)
            after = "AND name > %(after)s"
        found = self._rows(LIST_CHANNELS.replace("{after}", after), params,
                           f"listing the channels of {tenant}")
        views = [channel_view(r) for r in found[:page_size]]
        more = len(found) > page_size
        return views, (encode_page_token(views[-1].name) if more and views else None)

    def count_channels(self, tenant: str) -> int:
        rows = self._rows(COUNT_CHANNELS, {"tenant": tenant},
                          f"counting the channels of {tenant}")
        return int(rows[0][0]) if rows else 0
