"""Plain-text tables for people (`-o table`): columns sized to their widest cell, each cell
one printable line of bounded length."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC

from google.protobuf.timestamp_pb2 import Timestamp

# Wide enough for a job name or an error's gist; a longer value would push the columns
# after it off the screen, and `-o json` has it whole.
MOST_CELL_CHARS = 48
ABSENT = "-"

Row = Sequence[str]


def with_next_page(table: str, token: str) -> str:
    return table + (f"\n\nnext page: --page-token {token}" if token else "")


def table(columns: Row, rows: Iterable[Row]) -> str:
    cells = [list(columns)] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    return "\n".join("  ".join(value.ljust(width) for value, width in zip(row, widths,
                                                                           strict=True)).rstrip()
                     for row in cells)


def _cell(value: str) -> str:
    """One line of printable text: a name or handler error may hold newlines or terminal
    escape sequences, which would break the columns or drive the user's terminal."""
    shown = "".join(map(printable, value))
    if len(shown) > MOST_CELL_CHARS:
        shown = shown[:MOST_CELL_CHARS - 1] + "…"
    return shown or ABSENT


def printable(ch: str) -> str:
    kind = unicodedata.category(ch)
    if kind == "Zs" or ch in "\t\n\r":
        return " "
    return "?" if kind[0] in "CZ" else ch


def instant(timestamp: Timestamp) -> str:
    if not timestamp.seconds and not timestamp.nanos:
        return ABSENT
    return timestamp.ToDatetime(tzinfo=UTC).strftime("%Y-%m-%d %H:%M:%SZ")
