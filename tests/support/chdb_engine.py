"""chdb, a current ClickHouse in-process, for the tests that check the DDL and queries on a
newer engine than the 18.16 server. chdb ships py.typed but leaves its functions
unannotated, which strict mypy refuses to call: these protocols give it the types the tests
rely on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class Result(Protocol):
    def bytes(self) -> bytes: ...


class Engine(Protocol):
    def query(self, sql: str, fmt: str = "CSV") -> Result: ...


def chdb_session() -> Engine:
    """A new in-memory chdb session."""
    # Imported here, as each test did, so that modules collect where chdb (dev only) is absent.
    from chdb import session

    new: Callable[[], Engine] = session.Session
    return new()
