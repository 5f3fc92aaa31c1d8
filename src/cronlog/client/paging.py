"""A page of a list call, and every item across pages."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One answer of a list call: its items, and the token of the next page ("" at the
    end)."""

    items: tuple[T, ...]
    next_page_token: str = ""


def every_item(fetch: Callable[[str], Page[T]], page_token: str = "",
               most_pages: int | None = None) -> Iterator[T]:
    """The items of fetch(page_token), then of each next page until the api gives no next
    token: one call per page, made only when the items before it were taken; at most
    most_pages calls when given."""
    pages = 0
    while most_pages is None or pages < most_pages:
        page = fetch(page_token)
        pages += 1
        yield from page.items
        if not page.next_page_token:
            return
        page_token = page.next_page_token
