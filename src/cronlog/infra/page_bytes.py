"""The byte bound of a list read's page (issue 33, invariant 12), shared by the Postgres
and ClickHouse adapters: a page holds at most page_size rows and, past its first row, at
most PAGE_BYTES of their sized columns; its first row always (a page always moves the
keyset on, and a row over the bound alone is still returned alone).
"""

from __future__ import annotations

from collections.abc import Sequence

# What one page may hold of the sized columns: the 3 MiB a response keeps below the 4 MiB
# a gRPC client takes (infra/grpc/response_size.MAX_RESPONSE_BYTES), read from the
# database as raw bytes.
PAGE_BYTES = 3 * 1024 * 1024


def cut(sizes: Sequence[int], page_size: int, max_bytes: int) -> int:
    """How many of `sizes` (a page's candidates in order) the page keeps: at most page_size,
    the first always, then while the running sum stays within max_bytes. At most
    len(sizes) iterations of a few additions."""
    total = 0
    for index, size in enumerate(sizes[:page_size]):
        total += size
        if index and total > max_bytes:
            return index
    return min(len(sizes), page_size)
