from __future__ import annotations

import argparse
import json

from cronlog_dev.bench.metrics_cost_figures import (
    MetricsCostResult,
    MetricsCostRun,
    by_role,
    cpu_used,
    difference_percent,
    differences,
    per_thousand,
    render_metrics_cost,
    role_of,
)
from cronlog_dev.bench.options import add_arguments, from_namespace
from cronlog_dev.bench.results import to_jsonable


def run(pair: int, metrics: bool, scheduler: float, worker: float,
        runs: int = 60_000) -> MetricsCostRun:
    return MetricsCostRun(pair, metrics, 60_000, runs, 73.0,
                          {"scheduler": scheduler, "worker": worker, "projector": 10.0},
                          80.0, 10 if metrics else 0, 0)


def test_processes_are_summed_by_role() -> None:
    assert [role_of(p) for p in ("cronlog-scheduler-2", "scheduler", "cronlog-projector",
                                 "cronlog-worker-10")] == [
        "scheduler", "scheduler", "projector", "worker"]
    used = cpu_used({"cronlog-scheduler-1": 1.0, "cronlog-scheduler-2": 2.0, "gone": 5.0},
                    {"cronlog-scheduler-1": 4.0, "cronlog-scheduler-2": 3.5})
    assert used == {"cronlog-scheduler-1": 3.0, "cronlog-scheduler-2": 1.5}
    assert by_role(used) == {"scheduler": 4.5}


def test_cpu_per_thousand_runs_and_the_difference_in_percent() -> None:
    assert per_thousand(30.0, 60_000) == 0.5
    assert per_thousand(30.0, 0) is None and per_thousand(None, 10) is None
    assert difference_percent(0.5, 0.515) == 3.0
    assert difference_percent(0.5, 0.49) == -2.0
    assert difference_percent(0.0, 1.0) is None


def test_each_pair_and_all_pairs_pooled() -> None:
    runs = [run(1, False, 30.0, 20.0), run(1, True, 31.5, 20.0),
            run(2, False, 30.0, 20.0, runs=30_000), run(2, True, 15.0, 21.0, runs=30_000)]
    pair1, pair2, pooled = differences(runs)
    assert pair1.label == "pair 1" and pair1.percent["scheduler"] == 5.0
    assert pair1.percent["worker"] == 0.0
    assert pair2.off["scheduler"] == 1.0 and pair2.percent["scheduler"] == -50.0
    # Pooled: 60 s over 90,000 runs off, 46.5 s over 90,000 runs on.
    assert pooled.label == "all pairs"
    assert pooled.off["scheduler"] == round(60 / 90, 4)
    assert pooled.on["scheduler"] == round(46.5 / 90, 4)
    assert len(differences(runs[:2])) == 1, "one pair: nothing to pool"


def test_a_run_without_its_cpu_read_has_no_figure() -> None:
    missing = MetricsCostRun(1, True, 100, 100, 0.0, {}, None)
    (diff,) = differences([run(1, False, 30.0, 20.0), missing])
    assert diff.on["scheduler"] is None and diff.percent["scheduler"] is None


def test_the_table_has_a_row_per_run_and_per_difference_and_the_json_keeps_them() -> None:
    runs = [run(1, False, 30.0, 20.0), run(1, True, 31.5, 20.4)]
    result = MetricsCostResult("cronlog", 1000, 60, 15.0, runs, differences(runs), "test")
    lines = render_metrics_cost(result).splitlines()
    assert lines[0].startswith("| run") and "scheduler CPU s / 1k runs" in lines[0]
    off, on, diff = lines[2:]
    assert "| off " in off and "0.500" in off and "60,000/60,000" in off
    assert "| on " in on and "0.525" in on and "10/0" in on
    assert "+5.0 %" in diff and "+2.0 %" in diff
    doc = json.loads(json.dumps(to_jsonable({"metrics-cost": {"cronlog": result}})))
    assert doc["metrics-cost"]["cronlog"]["differences"][0]["percent"]["scheduler"] == 5.0


def test_metrics_cost_is_asked_for_by_name_with_its_pairs() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert "metrics-cost" not in from_namespace(parser.parse_args([])).workloads
    options = from_namespace(parser.parse_args(["--workloads", "metrics-cost",
                                                "--metrics-cost-pairs", "3"]))
    assert options.workloads == ("metrics-cost",) and options.metrics_cost_pairs == 3


def test_a_pair_whose_runs_started_after_the_window_is_left_out_of_the_pool() -> None:
    late = run(2, True, 15.0, 20.0)
    late.complete = False
    runs = [run(1, False, 30.0, 20.0), run(1, True, 31.5, 20.0), run(2, False, 30.0, 20.0),
            late, run(3, False, 30.0, 20.0), run(3, True, 30.0, 20.0)]
    _, pair2, _, pooled = differences(runs)
    assert pair2.label == "pair 2 (incomplete)" and pair2.percent["scheduler"] == -50.0
    assert pooled.label == "complete pairs" and pooled.percent["scheduler"] == 2.5
    table = render_metrics_cost(MetricsCostResult("cronlog", 1000, 60, 15.0, runs,
                                                  differences(runs), "test"))
    assert "60,000/60,000 late" in table and "complete pairs" in table
