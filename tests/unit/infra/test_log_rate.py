"""Refusals logged at a bounded rate (observability/log_rate.py): at most `limit` lines a
window, the rest counted and reported on the next line written; the api's refused calls go
through one (a flood of bad tokens is not a flood of lines)."""

from __future__ import annotations

import logging

import pytest

from cronlog.infra.grpc import auth
from cronlog.infra.observability.log_rate import LogRate
from tests.support.clock import FakeClock


def test_at_most_the_limit_a_window_then_the_count_of_the_rest() -> None:
    clock = FakeClock(seconds=1000.0)
    rate = LogRate(limit=3, interval=60.0, clock=clock)
    assert [rate.admit() for _ in range(10_000)] == [0, 0, 0] + [None] * 9_997
    clock.advance(59.9)
    assert rate.admit() is None
    clock.advance(0.1)
    # A new window: its first line says how many were left out before it.
    assert rate.admit() == 9_998
    assert rate.admit() == 0
    assert rate.admit() == 0
    assert rate.admit() is None


def test_lines_written_say_what_was_left_out(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(seconds=1000.0)
    rate = LogRate(limit=2, interval=10.0, clock=clock)
    logger = logging.getLogger("test.log_rate")
    with caplog.at_level(logging.INFO, logger="test.log_rate"):
        written = [rate.log(logger, logging.WARNING, "refused %s", n) for n in range(500)]
        clock.advance(10)
        rate.log(logger, logging.WARNING, "refused %s", "again")
    assert written.count(True) == 2
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0", "refused 1",
        "refused again (498 more like it not logged, at most 2 a 10 s)"]


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        LogRate(limit=0)
    with pytest.raises(ValueError):
        LogRate(interval=0)


class _Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"

    def abort(self, code: object, reason: str) -> None:
        raise RuntimeError(reason)


def test_the_apis_refused_calls_are_logged_at_a_bounded_rate(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(seconds=1000.0)
    monkeypatch.setattr(auth, "REFUSAL_LOG", LogRate(limit=10, interval=60.0, clock=clock))
    reject = auth._rejecting("unknown bearer token", streaming_response=False)
    with caplog.at_level(logging.INFO, logger=auth.__name__):
        for _ in range(5_000):
            with pytest.raises(RuntimeError, match="unknown bearer token"):
                reject(None, _Context())  # type: ignore[arg-type]
    lines = [r for r in caplog.records if r.name == auth.__name__]
    assert len(lines) == 10
    assert all("rejected a call from ipv4:127.0.0.1:5555" in r.getMessage() for r in lines)
