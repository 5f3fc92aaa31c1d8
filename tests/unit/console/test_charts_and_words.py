from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronlog.console import charts
from cronlog.console.pages import schedule_in_words
from cronlog.console.ports import JobSummary, MinutePoint
from cronlog.domain.schedule_words import describe_interval

T = datetime(2026, 1, 1, tzinfo=UTC)


def test_stacked_bars_stay_inside_the_frame() -> None:
    points = [MinutePoint(T + timedelta(minutes=i), {"succeeded": i, "failed": 1}) for i in range(5)]
    chart = charts.stacked_bars(points)
    assert chart.y_max == 5
    assert all(charts.PAD_TOP - 0.1 <= b.y <= chart.height - charts.PAD_BOTTOM for b in chart.bars)
    assert chart.series == ("succeeded", "failed") and chart.first_label == "00:00 UTC"


def test_lines_draw_the_target_and_scale_to_it() -> None:
    points = [MinutePoint(T, {"p50": 0.1, "p99": 0.3})]
    chart = charts.lines(points, ("p50", "p99"), target=2.0)
    assert chart.y_max >= 2.0 and chart.target_y is not None
    assert chart.target_y > charts.PAD_TOP and chart.target_label == "target 2 s"
    assert charts.lines([], ("p50",)).empty


def summary(kind: str, schedule: str, every: timedelta = timedelta(0)) -> JobSummary:
    return JobSummary("j", "n", "acme", "default", "echo", schedule, kind, "Europe/Berlin",
                      "active", 1, None, None, None, None, every=every)


@pytest.mark.parametrize(("kind", "schedule", "every", "words"), [
    ("cron", "*/5 * * * *", None, "every 5 minutes"),
    ("cron", "30 2 * * *", None, "at 02:30 every day"),
    ("cron", "0 9 * * 1", None, "at 09:00 on Mondays"),
    ("every", "every 1 h 30 min", timedelta(minutes=90), None),
    ("at", "at 2026-12-24T17:00:00+00:00", None, "at 2026-12-24T17:00:00+00:00"),
    ("cron", "garbage", None, "garbage"),
])
def test_schedule_in_words_are_previews_without_the_zone(
        kind: str, schedule: str, every: timedelta | None, words: str | None) -> None:
    job = summary(kind, schedule, every or timedelta(0))
    said = schedule_in_words(job)
    if words is not None:
        assert said == words
    else:
        assert said == describe_interval(timedelta(minutes=90), None, "Europe/Berlin")
        assert said.startswith("every ") and "Europe/Berlin" in said


def test_points_sit_at_their_minute_of_the_window() -> None:
    start = T
    chart = charts.stacked_bars([MinutePoint(T + timedelta(minutes=30), {"succeeded": 1})],
                                start=start, slots=60)
    (bar,) = chart.bars
    middle = charts.PAD_LEFT + (charts.WIDTH - charts.PAD_LEFT) / 2
    assert abs(bar.x - middle) < 1
    assert (chart.first_label, chart.last_label) == ("00:00 UTC", "00:59 UTC")
    line = charts.lines([MinutePoint(T + timedelta(minutes=59), {"p50": 1.0})], ("p50",),
                        start=start, slots=60)
    assert len(line.lines[0].dots) == 1 and line.lines[0].dots[0][0] > middle
