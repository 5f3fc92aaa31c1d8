"""The partitions workload's layouts, plan, CPU per 1,000 runs, ratios and table, from
made-up values."""

from __future__ import annotations

import argparse

import pytest

from cronlog_dev.bench.options import BenchOptions, add_arguments, from_namespace
from cronlog_dev.bench.partitions_figures import (
    ALL,
    LayoutRun,
    PartitionsResult,
    burst_due,
    check_seconds,
    default_kafka,
    layouts,
    per_thousand,
    ratios,
    render_partitions,
    steady_cron,
    steady_jobs,
    window_start,
    with_ratios,
)
from cronlog_dev.bench.stats import BurstFigures, LagSummary, SteadyFigures


def test_default_kafka_partitions_are_a_sixteenth_and_at_least_eight() -> None:
    assert [default_kafka(n) for n in (1, 4, 8, 64, 128, 256, 1024, 4096)] == [
        1, 4, 8, 8, 8, 16, 64, 256]
    # No divisor of that size: the layout before issue 34 (K = L).
    assert default_kafka(100) == 100


def test_layouts_pair_each_logical_count_with_its_kafka_count() -> None:
    assert layouts((8, 64, 1024), ()) == ((8, 8), (64, 8), (1024, 64))
    assert layouts((8, 64), (8, 64)) == ((8, 8), (64, 64))


@pytest.mark.parametrize(("logical", "kafka", "says"), [
    ((8, 64), (8,), "one Kafka partition count for each"),
    ((8, 64), (8, 48), "48 Kafka partitions do not divide 64"),
    ((), (), "at least one"),
])
def test_layouts_refuse_what_cannot_run(logical: tuple[int, ...], kafka: tuple[int, ...],
                                        says: str) -> None:
    with pytest.raises(ValueError, match=says):
        layouts(logical, kafka)


def test_the_plan_puts_rate_runs_in_every_second_and_the_burst_in_the_middle() -> None:
    assert steady_jobs(100) == 6000
    seconds = [int(steady_cron(i).split()[0]) for i in range(steady_jobs(3))]
    assert all(seconds.count(s) == 3 for s in range(60))
    assert window_start(1_800_000_001.5) == 1_800_000_060.0
    assert window_start(1_800_000_000.0) == 1_800_000_000.0
    assert burst_due(1_800_000_000.0, 120) == 1_800_000_060.0
    assert check_seconds(60) == 60
    with pytest.raises(ValueError, match="at least 60"):
        check_seconds(59)


def test_per_thousand_runs_has_every_process_and_their_sum() -> None:
    assert per_thousand({"scheduler": 1.0, "kafka": 3.0}, 2000) == {
        "scheduler": 0.5, "kafka": 1.5, ALL: 2.0}
    assert per_thousand({"scheduler": 1.0}, 0) == {}


def test_ratios_skip_what_the_baseline_lacks_or_has_at_zero() -> None:
    assert ratios({"kafka": 3.0, "worker": 1.0, "projector": 2.0},
                  {"kafka": 1.5, "worker": 0.0}) == {"kafka": 2.0}


def _run(logical: int, kafka: int, per_1k: dict[str, float]) -> LayoutRun:
    run = LayoutRun(logical, kafka, 20, 60, 2000, runs=3200, per_1k_runs=per_1k)
    run.steady = SteadyFigures(20, 60, 1200, 1200, 20.0, LagSummary(1200, 41.0, 180.0, 250.0))
    run.burst = BurstFigures(2000, 2000, 1.5, 1333.3, LagSummary(2000, 700.0, 1400.0, 1500.0))
    return run


def test_ratios_are_to_the_first_layout_with_figures() -> None:
    failed = LayoutRun(4, 4, 20, 60, 2000, error="ServiceDied: scheduler exited")
    runs = [failed, _run(8, 8, {"kafka": 1.0, ALL: 2.0}), _run(64, 8, {"kafka": 1.5, ALL: 2.6})]
    with_ratios(runs)
    assert failed.ratio_to_first == {}
    assert runs[1].ratio_to_first == {"kafka": 1.0, ALL: 1.0}
    assert runs[2].ratio_to_first == {"kafka": 1.5, ALL: 1.3}


def test_the_table_has_a_column_per_layout_and_says_which_failed() -> None:
    runs = [_run(8, 8, {"scheduler": 0.31, "kafka": 1.0, ALL: 1.31}),
            _run(1024, 64, {"scheduler": 0.4, "kafka": 2.5, ALL: 2.9}),
            LayoutRun(64, 8, 20, 60, 2000, error="ServiceDied: worker exited")]
    with_ratios(runs)
    table = render_partitions(PartitionsResult("cronlog", runs, "cpu", "lag"))
    lines = table.splitlines()
    assert lines[0].split("|")[2:5] == [" 8 / 8 partitions ", " 1,024 / 64 partitions ",
                                        " 64 / 8 partitions "]
    row = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:5]]
           for line in lines[2:] if line.startswith("|")}
    assert row["CPU s per 1k runs, kafka"] == ["1.00", "2.50", "-"]
    assert row["CPU s per 1k runs, all processes"] == ["1.31", "2.90", "-"]
    assert row["CPU per 1k runs / at 8 partitions, all processes"] == ["1.00", "2.21", "-"]
    assert row["runs started by the cap (steady + burst)"] == ["3,200/3,200", "3,200/3,200",
                                                               "0/3,200"]
    assert row["steady: start lag p99 ms"] == ["180", "180", "-"]
    assert row["burst: runs started by the cap"] == ["2,000/2,000", "2,000/2,000", "-"]
    # No process measured the projector: no row for it.
    assert "CPU s per 1k runs, projector" not in row
    assert lines[-1] == "failed layouts: 64 / 8: ServiceDied: worker exited"


def _options(*argv: str) -> BenchOptions:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return from_namespace(parser.parse_args(list(argv)))


def test_the_options_default_to_the_issue_and_refuse_a_layout_that_cannot_run() -> None:
    options = _options("--workloads", "partitions")
    assert (options.partitions_layouts, options.partitions_kafka,
            options.partitions_burst_jobs, options.partitions_steady_rate) == (
        (8, 64, 1024), (), 20_000, 100)
    with pytest.raises(SystemExit, match="do not divide"):
        _options("--workloads", "partitions", "--partitions-layouts", "8,64",
                 "--partitions-kafka", "8,48")
    with pytest.raises(SystemExit, match="at least 60"):
        _options("--workloads", "partitions", "--partitions-seconds", "30")
