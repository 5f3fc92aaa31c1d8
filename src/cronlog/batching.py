"""Cutting a stream of items into batches bounded in count and in bytes, in order."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def sized_batches(items: Iterable[T], size_of: Callable[[T], int], most_items: int,
                  most_bytes: int) -> Iterator[list[T]]:
    """Batches of at most `most_items` items and about `most_bytes` (a batch of one may be
    larger: an item is never split)."""
    batch: list[T] = []
    size = 0
    for item in items:
        grows = size_of(item)
        if batch and (len(batch) >= most_items or size + grows > most_bytes):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += grows
    if batch:
        yield batch
