"""The overview page: runs and start lag per minute, failing jobs, dead letters and the
top-of-hour load."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronlog.console import charts
from cronlog.console.pages.common import CHART_MINUTES, CHART_WINDOW
from cronlog.console.ports import FailingJob, HistoryUnavailable, RunHistory

# The overview's top-of-hour load: a day of runs by minute of the hour (a week would read
# every run of it, as FAILING_WINDOW says).
TOP_OF_HOUR_WINDOW = timedelta(days=1)


# A day: over 7 days these two queries read every run of the week (0.8 s for a million
# runs, docs/console.md); docs/analytics.md has the week-long versions.
FAILING_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class OverviewView:
    tenant: str
    runs_chart: charts.Chart | None
    lag_chart: charts.Chart | None
    top_failing: Sequence[FailingJob]
    dead_letters: int
    history_note: str
    top_of_hour: charts.Chart | None = None


def overview_view(history: RunHistory, tenant: str, now: datetime) -> OverviewView:
    if not tenant:
        return OverviewView(tenant, None, None, (), 0,
                            "no jobs yet: the overview shows your tenant's runs once it has some")
    since = now - CHART_WINDOW
    try:
        return OverviewView(
            tenant,
            charts.stacked_bars(history.runs_per_minute(tenant, since), start=since,
                                slots=CHART_MINUTES),
            charts.lines(history.start_lag_per_minute(tenant, since), ("p50", "p99"),
                         target=charts.LAG_TARGET_SECONDS, start=since, slots=CHART_MINUTES),
            history.top_failing(tenant, now - FAILING_WINDOW, 10),
            history.dead_letters(tenant, now - FAILING_WINDOW), "",
            charts.minute_of_hour_bars(history.top_of_hour(tenant, now - TOP_OF_HOUR_WINDOW)))
    except HistoryUnavailable as exc:
        return OverviewView(tenant, None, None, (), 0, f"run history unavailable: {exc}")
