"""PostgresCalendarReads: the api's read-only view of the `calendars` table (issue 20).

The calendars' owners write the table when they commit (the scheduler side's schema); the
api reads it for GetCalendar, ListCalendars, the snapshot a job naming a calendar carries,
and previews. Every statement names the tenant: no read reaches another tenant's calendar.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from cronlog.commands.calendar_snapshot import CalendarView
from cronlog.domain.errors import InvalidSpec
from cronlog.domain.exclusions import CALENDAR_NAME_PATTERN, Exclusions
from cronlog.infra.postgres.connection import StateStoreError

COLUMNS = ("SELECT tenant, name, calendar_id, version, description, exclusions, subscribers, "
           "updated_at FROM calendars")
GET_CALENDAR = COLUMNS + " WHERE tenant = %(tenant)s AND name = %(name)s"
# Keyset pagination on the primary key (tenant, name): stable while calendars are added.
LIST_CALENDARS = COLUMNS + " WHERE tenant = %(tenant)s ORDER BY name LIMIT %(limit)s"
LIST_CALENDARS_AFTER = (COLUMNS + " WHERE tenant = %(tenant)s AND name > %(after)s "
                        "ORDER BY name LIMIT %(limit)s")
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
        self._pool = ConnectionPool(dsn, min_size=1, max_size=4, open=True)

    def close(self) -> None:
        self._pool.close()

    def _rows(self, query: str, params: dict[str, Any], what: str) -> list[tuple[Any, ...]]:
        try:
            with self._pool.connection() as conn:
                return conn.execute(query, params).fetchall()
        except psycopg.Error as exc:
            raise StateStoreError(f"{what}: {exc}") from exc

    def calendar(self, tenant: str, name: str) -> CalendarView | None:
        rows = self._rows(GET_CALENDAR, {"tenant": tenant, "name": name},
                          f"reading calendar {tenant}/{name}")
        return calendar_view(rows[0]) if rows else None

    def calendars(self, tenant: str, page_size: int,
                  page_token: str | None) -> tuple[list[CalendarView], str | None]:
        params: dict[str, Any] = {"tenant": tenant, "limit": page_size + 1}
        query = LIST_CALENDARS
        if page_token:
            params["after"] = decode_page_token(page_token)
            query = LIST_CALENDARS_AFTER
        rows = [calendar_view(r) for r in
                self._rows(query, params, f"listing the calendars of {tenant}")]
        more = len(rows) > page_size
        rows = rows[:page_size]
        return rows, (encode_page_token(rows[-1].name) if more and rows else None)

    def count_calendars(self, tenant: str) -> int:
        rows = self._rows(COUNT_CALENDARS, {"tenant": tenant},
                          f"counting the calendars of {tenant}")
        return int(rows[0][0]) if rows else 0
