"""Chart geometry for server-side SVG: numbers in, rectangles and polylines out. The
templates draw them (escaped like everything else); no script and no library."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronlog.console.ports import MinuteOfHourLoad, MinutePoint

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 640, 180, 44, 20, 10
# The design's promise: runs start within 2 s of their time at p99.
LAG_TARGET_SECONDS = 2.0
OUTCOME_ORDER = ("succeeded", "running", "scheduled", "failed", "dead_lettered", "cancelled",
                 "missed", "skipped")


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: str
    title: str


@dataclass(frozen=True)
class Line:
    series: str
    points: str
    dots: tuple[tuple[float, float], ...] = ()


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: tuple[Bar, ...]
    lines: tuple[Line, ...]
    y_max: float
    y_unit: str
    first_label: str
    last_label: str
    # The y position of a reference line (the start-lag target), if any.
    target_y: float | None
    target_label: str
    series: tuple[str, ...]
    empty: bool


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above value: round axis tops."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude


def _label(minute: datetime | None) -> str:
    return minute.strftime("%H:%M UTC") if minute else ""


@dataclass(frozen=True)
class _Frame:
    """The time axis: one slot per minute from start, so an hour with a single busy minute
    still reads as an hour."""

    start: datetime
    slots: int

    @property
    def slot_width(self) -> float:
        return (WIDTH - PAD_LEFT) / self.slots

    @property
    def plot_height(self) -> float:
        return float(HEIGHT - PAD_BOTTOM - PAD_TOP)

    def index(self, minute: datetime) -> int:
        return min(max(int((minute - self.start).total_seconds() // 60), 0), self.slots - 1)

    def labels(self) -> tuple[str, str]:
        return _label(self.start), _label(self.start + timedelta(minutes=self.slots - 1))


def _frame(points: Sequence[MinutePoint], start: datetime | None, slots: int) -> _Frame:
    if start is None:
        start = points[0].minute if points else datetime(1970, 1, 1, tzinfo=UTC)
        slots = max(len(points), 1)
    return _Frame(start.replace(second=0, microsecond=0), max(slots, 1))


def stacked_bars(points: Sequence[MinutePoint], unit: str = "runs",
                 start: datetime | None = None, slots: int = 60) -> Chart:
    """Runs per minute, stacked by outcome; start None: one slot per point."""
    frame = _frame(points, start, slots)
    totals = [sum(p.values.values()) for p in points]
    y_max = _nice_max(max(totals, default=0))
    present = {k for p in points for k in p.values}
    order = [s for s in OUTCOME_ORDER if s in present] + sorted(present - set(OUTCOME_ORDER))
    bars: list[Bar] = []
    slot = frame.slot_width
    for point in points:
        x = PAD_LEFT + frame.index(point.minute) * slot
        base = float(HEIGHT - PAD_BOTTOM)
        for series in order:
            value = point.values.get(series, 0)
            if value <= 0:
                continue
            h = value / y_max * frame.plot_height
            base -= h
            bars.append(Bar(round(x + 0.5, 1), round(base, 1), round(max(slot - 1, 1), 1),
                            round(h, 1), series, f"{_label(point.minute)} {series}: {value:g}"))
    first, last = frame.labels()
    return Chart(WIDTH, HEIGHT, tuple(bars), (), y_max, unit, first, last, None, "",
                 tuple(order), not points)


def lines(points: Sequence[MinutePoint], series: Sequence[str], unit: str = "s",
          target: float | None = None, start: datetime | None = None,
          slots: int = 60) -> Chart:
    """One polyline per series (p50, p99...) with a dot at each point, and an optional
    reference line."""
    frame = _frame(points, start, slots)
    values = [p.values.get(s, 0.0) for p in points for s in series]
    y_max = _nice_max(max([*values, target or 0.0], default=0.0) * 1.1)
    drawn: list[Line] = []
    for name in series:
        coords = [(PAD_LEFT + (frame.index(p.minute) + 0.5) * frame.slot_width,
                   HEIGHT - PAD_BOTTOM - p.values[name] / y_max * frame.plot_height)
                  for p in points if name in p.values]
        drawn.append(Line(name, " ".join(f"{x:.1f},{y:.1f}" for x, y in coords),
                          tuple((round(x, 1), round(y, 1)) for x, y in coords)))
    target_y = None if target is None else round(
        HEIGHT - PAD_BOTTOM - target / y_max * frame.plot_height, 1)
    first, last = frame.labels()
    return Chart(WIDTH, HEIGHT, (), tuple(drawn), y_max, unit, first, last, target_y,
                 f"target {target:g} {unit}" if target is not None else "", tuple(series),
                 not points)


MINUTES_OF_HOUR = 60


def minute_of_hour_bars(load: Sequence[MinuteOfHourLoad], series: str = "runs") -> Chart:
    """The top-of-hour load: one bar per minute of the hour (:00 to :59), its height the runs
    due at that minute over the window; a spike at :00 is the top of the hour."""
    slot = (WIDTH - PAD_LEFT) / MINUTES_OF_HOUR
    plot_height = float(HEIGHT - PAD_BOTTOM - PAD_TOP)
    y_max = _nice_max(max((p.runs for p in load), default=0))
    bars: list[Bar] = []
    for point in load:
        if not 0 <= point.minute < MINUTES_OF_HOUR or point.runs <= 0:
            continue
        h = point.runs / y_max * plot_height
        bars.append(Bar(round(PAD_LEFT + point.minute * slot + 0.5, 1),
                        round(HEIGHT - PAD_BOTTOM - h, 1), round(max(slot - 1, 1), 1),
                        round(h, 1), series,
                        f":{point.minute:02d} {point.runs} {series}, "
                        f"{point.runs_per_hour:g} an hour on average"))
    return Chart(WIDTH, HEIGHT, tuple(bars), (), y_max, series, ":00", ":59", None, "",
                 (series,), not bars)
