"""The start-lag figures live in cronlog_dev.bench.start_lag, where the bench's failover
workload uses them too; re-exported for the chaos tests."""

from cronlog_dev.bench.start_lag import (
    RunStart,
    Window,
    WindowLag,
    lag_table,
    lags_by_kind,
    run_starts,
    window_lags,
)

__all__ = ["RunStart", "Window", "WindowLag", "lag_table", "lags_by_kind", "run_starts",
           "window_lags"]
