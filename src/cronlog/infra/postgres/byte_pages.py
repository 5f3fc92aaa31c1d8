"""Pages bounded in rows and in bytes by the database itself (issue 33, invariant 12).

A list read asks for at most page_size + 1 rows in keyset order, as before; the statement
now also sizes each of them (the bytes of its large columns, counted without reading them:
octet_length of a bytea reads the TOAST header only) and keeps a running sum in a window.
It returns the rows that fit, whole, and at most one row more with its large columns NULL,
which only says that a next page exists. So a call never receives more than the page:

- at most page_size rows and, past the first, at most max_bytes of sized columns;
- the first row always, whatever its size (a page always moves the keyset on);
- one marker row after them when there is more (kept = false, large columns NULL).

infra/page_bytes.cut is the same rule in Python (ListRuns cuts its ClickHouse page with it).

Each pool connection of the api's reads carries a statement_timeout (`configure_reads`), so
a list read holds a connection for at most one bounded statement.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from cronlog.infra.page_bytes import PAGE_BYTES

__all__ = ["PAGE_BYTES", "byte_bounded", "configure_reads"]

# The longest an api read may run in Postgres before it is cancelled (57014, a
# StateStoreError for the caller): a page is at most 1,001 rows from an index, well under
# 100 ms at the brief's scale; a statement still running after this is not a page.
READ_STATEMENT_TIMEOUT_MS = 5_000

# The window over a statement's candidates ({candidates}: its keyset query with a `bytes`
# column, ORDER BY {order} LIMIT page_size + 1). {columns} names what the caller reads from
# `page`, its large columns as CASE WHEN kept THEN ... END. The window reads the candidates
# in their index order (no sort); rows past the marker are dropped inside Postgres.
BYTE_BOUNDED_PAGE = """
SELECT {columns}, kept
FROM (SELECT sized.*, n <= %(page_size)s AND (n = 1 OR upto <= %(max_bytes)s) AS kept
      FROM (SELECT candidates.*, row_number() OVER w AS n, sum(bytes) OVER w AS upto
            FROM ({candidates}) AS candidates
            WINDOW w AS (ORDER BY {order} ROWS UNBOUNDED PRECEDING)) AS sized
      WHERE n <= 2 OR upto - bytes <= %(max_bytes)s) AS page
ORDER BY {order}
"""


def byte_bounded(candidates: str, order: str, columns: str) -> str:
    """BYTE_BOUNDED_PAGE around one keyset statement."""
    return (BYTE_BOUNDED_PAGE.replace("{candidates}", candidates.strip())
            .replace("{order}", order).replace("{columns}", columns))


def configure_reads(conn: Connection[Any]) -> None:
    """A read pool's new connection: every statement it runs is bounded in time."""
    conn.execute(f"SET statement_timeout = {int(READ_STATEMENT_TIMEOUT_MS)}")
    conn.commit()
