"""How `cronlog sql` prints a result: ClickHouse's own text formats, written from the rows the
native protocol returns (that protocol carries data, never formatted text)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

FORMATS = ("tsv", "csv", "json", "table")
# A table's widths need every row first; past this many it stops and says so.
TABLE_MAX_ROWS = 10_000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r",
                              "\0": "\\0", "\b": "\\b", "\f": "\\f"})


def text(value: Any) -> str:
    """A value as ClickHouse writes it in text formats (arrays as [1,'a'], NULL as NULL)."""
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        inner = ",".join(_quoted(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _quoted(value: Any) -> str:
    if isinstance(value, (str, bytes, date, UUID)):
        return "'" + text(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text(value)


def tsv(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """TabSeparatedWithNames: tabs, line breaks and backslashes escaped, NULL as \\N."""
    yield "\t".join(n.translate(_TSV_ESCAPES) for n in names) + "\n"
    for row in rows:
        yield "\t".join("\\N" if v is None else text(v).translate(_TSV_ESCAPES)
                        for v in row) + "\n"


def csv_lines(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """CSVWithNames, NULL as an empty field."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    yield buffer.getvalue()
    for row in rows:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(["" if v is None else text(v) for v in row])
        yield buffer.getvalue()


def _json_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, (datetime, date, UUID, Decimal, bytes)):
        return text(value)
    return value


def json_lines(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """JSONEachRow: an object a line."""
    for row in rows:
        yield json.dumps(dict(zip(names, (_json_value(v) for v in row), strict=True)),
                         ensure_ascii=False) + "\n"


def _cell(value: Any) -> str:
    # Control characters would break the columns or drive the terminal.
    return _CONTROL.sub("?", text(value))


def table(names: Sequence[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """Columns aligned under their names (numbers to the right), at most TABLE_MAX_ROWS."""
    cells: list[list[str]] = []
    right = [True] * len(names)
    more = False
    for row in rows:
        if len(cells) == TABLE_MAX_ROWS:
            more = True
            break
        cells.append([_cell(v) for v in row])
        for i, v in enumerate(row):
            if not isinstance(v, (int, float, Decimal)) or isinstance(v, bool):
                right[i] = False
    head = [_cell(n) for n in names]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(head)]

    def line(values: Sequence[str]) -> str:
        return " │ ".join(v.rjust(w) if r else v.ljust(w)
                          for v, w, r in zip(values, widths, right, strict=True)).rstrip() + "\n"

    yield line(head)
    yield "─┼─".join("─" * w for w in widths) + "\n"
    for r in cells:
        yield line(r)
    if more:
        yield f"(the first {TABLE_MAX_ROWS:,} rows; --format tsv prints every row)\n"


WRITERS = {"tsv": tsv, "csv": csv_lines, "json": json_lines, "table": table}
