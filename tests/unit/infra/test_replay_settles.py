"""cronlog replay on a running service: a live projection a moment behind the log is read
again until it caught up, and only a difference that lasts is reported (the executed
documentation found `cronlog replay` failing against `make run` while a job fired)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cronlog.infra.entrypoints import replay
from cronlog.infra.entrypoints.replay import Comparison, _compare, _settled

REBUILT: list[tuple[object, ...]] = [("run-1", 3, "succeeded")]


def test_a_live_row_behind_the_rebuild_is_read_again_until_it_caught_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "_SETTLE_POLL_S", 0.01)
    live_reads: Iterator[list[tuple[object, ...]]] = iter([
        [("run-1", 1, "scheduled")], [("run-1", 2, "running")], [("run-1", 3, "succeeded")]])
    reads: list[int] = []

    def compare() -> Comparison:
        reads.append(1)
        return _compare("runs", REBUILT, next(live_reads), 1, 1)

    assert _settled(compare, within_s=5).mismatches == []
    assert len(reads) == 3


def test_a_difference_that_lasts_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "_SETTLE_POLL_S", 0.01)
    result = _settled(lambda: _compare("runs", REBUILT, [("run-1", 3, "failed")], 1, 1),
                      within_s=0.05)
    assert result.mismatches == [
        "('run-1',): rebuilt ('run-1', 3, 'succeeded') != live ('run-1', 3, 'failed')"]
