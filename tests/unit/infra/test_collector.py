"""The long-running roles' garbage collector: what was built at start is frozen, and young
collections run every YOUNG allocations instead of 700 (infra/entrypoints/collector.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from cronlog.infra.entrypoints.collector import MIDDLE, YOUNG, settle_collector


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_settled_role_freezes_what_it_built_and_collects_less_often(restored: None) -> None:
    built = [[n] for n in range(1000)]  # what a role holds once started
    settle_collector()
    assert gc.get_freeze_count() >= len(built)
    young, middle, old = gc.get_threshold()
    assert (young, middle) == (YOUNG, MIDDLE) and young > 700
    assert old == 10, "full collections keep the interpreter's rule"


def test_garbage_in_cycles_is_still_collected_by_itself(restored: None) -> None:
    import weakref

    settle_collector()

    class Node:
        def __init__(self) -> None:
            self.me = self

    node = Node()
    gone = weakref.ref(node)
    del node
    assert gone() is not None, "a cycle outlives its last reference until a collection"
    # A young collection comes after YOUNG allocations of container objects, kept alive.
    held = [[n] for n in range(2 * YOUNG)]
    assert gone() is None and len(held) == 2 * YOUNG
