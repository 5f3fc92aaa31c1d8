"""Starting several servers at once: on 2 cores most of a start is waiting for a JVM or a
server to come up, so they wait side by side."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from cronlog_dev.stack.process import StackError

T = TypeVar("T")


def all_at_once(action: Callable[[T], None], items: Iterable[T],
                on_failure: Callable[[], None]) -> None:
    """Runs action on every item, each in a thread of its own. When any failed, once every
    one had its try: on_failure, then a StackError naming every failure."""
    errors: list[BaseException] = []

    def attempt(item: T) -> None:
        try:
            action(item)
        except BaseException as exc:  # reported below, after every item had its try
            errors.append(exc)

    threads = [threading.Thread(target=attempt, args=(item,), daemon=True) for item in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        on_failure()
        raise StackError("; ".join(str(e) for e in errors)) from errors[0]
