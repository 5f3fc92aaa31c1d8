"""Which dispatch offsets a worker may commit."""

from __future__ import annotations

import heapq


class OffsetTracker:
    """Commits a dispatch partition only past offsets that were started or dropped.

    A worker that dies holding a dispatch it has not started leaves it uncommitted, so the
    group hands it to another worker.
    """

    def __init__(self) -> None:
        self._open: dict[int, set[int]] = {}
        # The open offsets again, as a heap whose settled entries are dropped lazily: the
        # lowest open offset without a scan of every held dispatch at each commit.
        self._lowest: dict[int, list[int]] = {}
        self._highest: dict[int, int] = {}

    def received(self, partition: int, offset: int) -> None:
        still_open = self._open.get(partition)
        if still_open is None:
            still_open = self._open[partition] = set()
            self._lowest[partition] = []
        if offset not in still_open:
            still_open.add(offset)
            heapq.heappush(self._lowest[partition], offset)
        if offset > self._highest.get(partition, -1):
            self._highest[partition] = offset

    def settled(self, partition: int, offset: int) -> None:
        still_open = self._open.get(partition)
        if still_open is not None:
            still_open.discard(offset)

    def forget(self, partition: int) -> None:
        self._open.pop(partition, None)
        self._lowest.pop(partition, None)
        self._highest.pop(partition, None)

    def committable(self) -> dict[int, int]:
        result: dict[int, int] = {}
        for partition, highest in self._highest.items():
            still_open = self._open[partition]
            lowest = self._lowest[partition]
            while lowest and lowest[0] not in still_open:
                heapq.heappop(lowest)
            result[partition] = lowest[0] if lowest else highest + 1
        return result
