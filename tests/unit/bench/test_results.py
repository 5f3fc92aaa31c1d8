from __future__ import annotations

from cronlog_dev.bench.results import (
    BurstResult,
    Creation,
    ratio,
    render_table,
    rows,
    to_jsonable,
    total_rss,
)
from cronlog_dev.bench.rss import RssPeak
from cronlog_dev.bench.stats import BurstFigures, LagSummary


def burst(system: str, started: int, rate: float) -> BurstResult:
    return BurstResult(system, "2026-01-01T00:00:00+00:00", 60.0,
                       Creation(10, 10, 1.0, 10.0, 12.0),
                       BurstFigures(10, started, None, rate, LagSummary(started, 5.0, 9.0, 9.5)),
                       "test", {"w": RssPeak(100.0, 101.0), "s": RssPeak(50.0, None)})


def test_ratio_is_ours_over_theirs() -> None:
    assert ratio(2.0, 4.0) == 0.5
    assert ratio(None, 4.0) is None
    assert ratio(1.0, 0.0) is None


def test_table_has_both_sides_and_the_ratio() -> None:
    results = {"burst": {"cronlog": burst("cronlog", 8, 200.0),
                         "pgqueuer": burst("pgqueuer", 10, 400.0)}}
    table = render_table(rows(results))
    lines = table.splitlines()
    assert lines[0].startswith("| figure")
    started = next(line for line in lines if "runs started" in line)
    assert "8/10" in started and "10/10" in started
    dispatches = next(line for line in lines if "dispatches/s" in line)
    assert dispatches.rstrip(" |").endswith("0.50")
    assert total_rss(results["burst"]["cronlog"].rss) == 150.0


def test_one_side_missing_shows_dashes() -> None:
    table = render_table(rows({"burst": {"cronlog": burst("cronlog", 10, 1.0)}}))
    cells = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    assert cells[2] == "-" and cells[3] == "-"


def test_results_are_json_ready() -> None:
    import json

    doc = to_jsonable({"burst": {"cronlog": burst("cronlog", 10, 1.0)}})
    assert json.loads(json.dumps(doc))["burst"]["cronlog"]["rss"]["w"]["hwm_mib"] == 101.0
