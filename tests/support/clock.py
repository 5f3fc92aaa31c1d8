"""The one clock fake of the tests: time stands still until a test moves it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class FakeClock:
    """Both clocks cronlog's code takes: the wall clock of a `Clock` port (`now()`) and a
    monotonic one (`monotonic()`, or the clock itself called, in time.monotonic's place).
    A test that needs the two apart sets `at` or `seconds`; `advance` moves both, and
    `sleep` is `advance` for code that sleeps through a clock it is given."""

    at: datetime = T0
    seconds: float = 0.0

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.seconds

    def __call__(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)
        self.seconds += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
