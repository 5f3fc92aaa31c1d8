"""PostgresCalendarReads: the api's read-only view of the `calendars` table (issue 20).

The calendars' owners write the table when they commit (the scheduler side's schema); the
api reads it for GetCalendar, ListCalendars, the snapshot a job naming a calendar carries,
and previews. Every statement names the tenant: no read reaches another tenant's calendar.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cronlog.commands.api.ports import CalendarView
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import CALENDAR_NAME_PATTERN, Exclusions
from cronlog.infra.postgres.bounded_pool import BoundedPool
from cronlog.infra.postgres.byte_pages import PAGE_BYTES, byte_bounded
from cronlog.infra.postgres.connection import StateStoreError

COLUMNS = ("SELECT tenant, name, calendar_id, version, description, exclusions, subscribers, "
           "updated_at FROM calendars")
GET_CALENDAR = COLUMNS + " WHERE tenant = %(tenant)s AND name = %(name)s"
# Keyset pagination on the primary key (tenant, name): stable while calendars are added.
# Bounded in bytes inside the statement (byte_pages): a calendar of 1,000 ranges is about
# 26 KB of JSON, sized by its count of days and ranges (at most 26 bytes each as text;
# counting reads no text) and its description; only the calendars that fit come back whole.
CALENDAR_CANDIDATES = """
SELECT tenant, name, calendar_id, version, description, exclusions, subscribers, updated_at,
       26 * jsonb_array_length(exclusions) + octet_length(description) + octet_length(name)
       + 64 AS bytes
FROM calendars WHERE tenant = %(tenant)s {after}
ORDER BY name LIMIT %(limit)s
"""
PAGE_COLUMNS = ("tenant, name, calendar_id, version, CASE WHEN kept THEN description END, "
                "CASE WHEN kept THEN exclusions END, subscribers, updated_at")
LIST_CALENDARS = byte_bounded(CALENDAR_CANDIDATES.replace("{after}", ""), "name",
                              PAGE_COLUMNS)
LIST_CALENDARS_AFTER = byte_bounded(CALENDAR_CANDIDATES.replace("{after}",
                                                                "AND name > %(after)s"),
                                    "name", PAGE_COLUMNS)
COUNT_CALENDARS = "SELECT count(*) FROM calendars WHERE tenant = %(tenant)s"


class InvalidCalendarPageToken(InvalidSpec):
    """A page token this service did not hand out."""

    def __init__(self, token: str) -> None:
        super().__init__("page_token", f"{token[:64]!r} is not a token this service gave out")


class CorruptCalendarRow(StateStoreError):
    """A calendars row whose exclusions do not parse."""


def encode_page_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def decode_page_token(token: str) -> str:
    try:
        name = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCalendarPageToken(token) from None
    if not CALENDAR_NAME_PATTERN.fullmatch(name):
        raise InvalidCalendarPageToken(token)
    return name


def calendar_view(row: tuple[Any, ...]) -> CalendarView:
    tenant, name, calendar_id, version, description, exclusions, subscribers, updated_at = row
    try:
        parsed = Exclusions.parse(exclusions or [], "exclusions")
    except InvalidSpec as exc:
        raise CorruptCalendarRow(f"calendar {tenant}/{name}: stored exclusions: {exc}") from exc
    return CalendarView(tenant=tenant, name=name, calendar_id=calendar_id, version=int(version),
                        description=description or "", exclusions=parsed,
                        subscribers=int(subscribers or 0), updated_at=updated_at)


class PostgresCalendarReads:
    def __init__(self, dsn: str) -> None:
        # Every statement bounded in time (byte_pages.configure_reads).
        self._pool = BoundedPool(dsn, max_size=4)

    def close(self) -> None:
        self._pool.close()

    def _rows(self, query: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        return self._pool.rows(query, params, what)

    def calendar(self, tenant: str, name: str) -> CalendarView | None:
        rows = self._rows(GET_CALENDAR, {"tenant": tenant, "name": name},
                          f"reading calendar {tenant}/{name}")
        return calendar_view(rows[0]) if rows else None

    def calendars(self, tenant: str, page_size: int, page_token: str | None,
                  max_bytes: int = PAGE_BYTES) -> tuple[list[CalendarView], str | None]:
        """At most page_size calendars in name order and, past the first, at most max_bytes
        of them (byte_pages); the token is the position after the last one returned."""
        params: dict[str, Any] = {"tenant": tenant, "limit": page_size + 1,
                                  "page_size": page_size, "max_bytes": max_bytes}
        query = LIST_CALENDARS
        if page_token:
            params["after"] = decode_page_token(page_token)
            query = LIST_CALENDARS_AFTER
        found = self._rows(query, params, f"listing the calendars of {tenant}")
        rows = [calendar_view(r[:-1]) for r in found if r[-1]]
        more = len(rows) < len(found)
        return rows, (encode_page_token(rows[-1].name) if more and rows else None)

    def count_calendars(self, tenant: str) -> int:
        rows = self._rows(COUNT_CALENDARS, {"tenant": tenant},
                          f"counting the calendars of {tenant}")
        return int(rows[0][0]) if rows else 0
