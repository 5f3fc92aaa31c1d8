"""ClickHouse's alert_deliveries (schema.sql): written by the history projector
(projections/delivery_history.py), read a page at a time by the api's ListAlertDeliveries
through the history's own connections."""

from __future__ import annotations

import base64
import operator
from collections.abc import Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from cronlog.infra.clickhouse.run_history import ClickHouseRunHistory, InvalidRunPageToken
from cronlog.projections.delivery_history import AlertDeliveryRow, DeliveryFilter

DELIVERY_COLUMNS = [f.name for f in fields(AlertDeliveryRow)]
_delivery_values = operator.attrgetter(*DELIVERY_COLUMNS)
INSERT_DELIVERIES = ("INSERT INTO {db}.alert_deliveries (sent_at, "
                     + ", ".join(DELIVERY_COLUMNS) + ") VALUES")
# A page of one tenant's attempts, newest first, keyset-paginated on (sent_at_us,
# delivery_id, attempt) so pages stay stable while new attempts arrive. LIMIT 1 BY keeps
# one row of an attempt recorded twice (the same key; ClickHouse 18.16 has LIMIT BY, and
# applies it after ORDER BY and before LIMIT). The tenant leads the table's key, and a job
# narrows it further: a page reads the tenant's (or the job's) rows of the 90 days at most.
LIST_DELIVERIES = (
    "SELECT " + ", ".join(DELIVERY_COLUMNS) + " FROM {db}.alert_deliveries"
    " WHERE tenant = %(tenant)s {filters}"
    " ORDER BY sent_at_us DESC, delivery_id DESC, attempt DESC"
    " LIMIT 1 BY delivery_id, attempt"
    " LIMIT %(limit)s")
_AFTER_TOKEN = ("(sent_at_us < %(tok_at)s OR (sent_at_us = %(tok_at)s AND "
                "(delivery_id < %(tok_delivery)s OR (delivery_id = %(tok_delivery)s AND "
                "attempt < %(tok_attempt)s))))")


def encode_delivery_token(row: AlertDeliveryRow) -> str:
    text = f"{row.sent_at_us}|{row.delivery_id}|{row.attempt}"
    return base64.urlsafe_b64encode(text.encode()).decode()


def decode_delivery_token(token: str) -> tuple[int, str, int]:
    try:
        at, delivery_id, attempt = base64.urlsafe_b64decode(token.encode()).decode().split("|")
        return int(at), str(UUID(delivery_id)), int(attempt)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRunPageToken(f"page_token {token!r} is not valid") from exc


def _day_second(micros: int) -> datetime:
    return datetime.fromtimestamp(micros // 1_000_000, UTC).replace(tzinfo=None)


class ClickHouseAlertDeliveries:
    """The DeliveryHistoryStore of the projector and the AlertDeliveryReader of the api."""

    def __init__(self, history: ClickHouseRunHistory) -> None:
        # Its tables are made by history.ensure_schema (schema.sql), with the others.
        self._history = history

    def _sql(self, template: str, filters: str = "") -> str:
        return template.replace("{db}", self._history.database).replace("{filters}", filters)

    def write_delivery_rows(self, rows: Sequence[AlertDeliveryRow]) -> None:
        values = [(_day_second(r.sent_at_us), *_delivery_values(r)) for r in rows]
        self._history.execute(self._sql(INSERT_DELIVERIES), values)

    def list_deliveries(self, where: DeliveryFilter, page_size: int, page_token: str | None
                        ) -> tuple[list[AlertDeliveryRow], str | None]:
        """At most page_size attempts (the caller bounds it), newest first; the token is
        the position after the last, None on the last page."""
        conditions: list[str] = []
        params: dict[str, Any] = {"tenant": where.tenant, "limit": page_size + 1}
        if where.job_id:
            conditions.append("job_id = %(job_id)s")
            params["job_id"] = where.job_id
        if where.channel_name:
            conditions.append("channel_name = %(channel)s")
            params["channel"] = where.channel_name
        if where.outcome:
            conditions.append("outcome = %(outcome)s")
            params["outcome"] = where.outcome
        if page_token:
            at_us, delivery_id, attempt = decode_delivery_token(page_token)
            conditions.append(_AFTER_TOKEN)
            params.update(tok_at=at_us, tok_delivery=delivery_id, tok_attempt=attempt)
        filters = "".join(f" AND {c}" for c in conditions)
        rows = [AlertDeliveryRow(*values) for values in self._history.execute(
            self._sql(LIST_DELIVERIES, filters), params)]
        more = len(rows) > page_size
        rows = rows[:page_size]
        return rows, encode_delivery_token(rows[-1]) if more and rows else None
