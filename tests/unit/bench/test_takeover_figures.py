from __future__ import annotations

import argparse
import json
from datetime import datetime

import pytest

from cronlog_dev.bench.options import add_arguments, from_namespace, takeover_plan
from cronlog_dev.bench.results import (
    TakeoverResult,
    TakeoverRun,
    render_table,
    rows,
    to_jsonable,
)
from cronlog_dev.bench.takeover_figures import (
    LoggedTake,
    OwnerRow,
    balanced,
    newly_owned,
    parse_takes,
    shares,
    takeover,
    target_verdict,
)

LINE = ("2026-12-04 04:50:01,250 INFO cronlog.commands.owner.partition_owner: owner cl_x-s2 took "
        "partitions [0, 3, 5] at epochs [4, 5] in 0.11s")


def test_parses_the_owners_take_line() -> None:
    takes = parse_takes([
        "2026-12-04 04:50:01,000 INFO cronlog.infra.entrypoints.processes: scheduler s2 running",
        LINE + "\n",
        "2026-12-04 04:50:02,000 INFO x: owner a took partitions [] at epochs [] in 0.00s",
    ])
    assert len(takes) == 2
    first = takes[0]
    assert first.owner == "cl_x-s2"
    assert first.partitions == (0, 3, 5)
    assert first.seconds == 0.11
    # Local time, as the logging module writes asctime.
    assert first.at == datetime(2026, 12, 4, 4, 50, 1, 250_000).timestamp()
    assert takes[1].partitions == ()


def test_ignores_lines_that_only_mention_taking() -> None:
    assert parse_takes(["taking partitions [1] failed, will retry: boom",
                        "owner x took partitions [1] at epochs [2]"]) == []


def row(p: int, epoch: int, owner: str | None, caught_up: bool = True,
        taken_at: float | None = 100.0) -> OwnerRow:
    return OwnerRow(p, epoch, owner, caught_up, taken_at)


def test_newly_owned_needs_a_new_epoch_and_another_owner() -> None:
    before = {0: row(0, 3, "a"), 1: row(1, 3, "a"), 2: row(2, 3, "a"), 3: row(3, 1, "b")}
    now = {0: row(0, 4, "b"), 1: row(1, 3, "a"),
           # A new epoch by the leaving owner itself (it re-took before it left) is not a move.
           2: row(2, 4, "a"), 3: row(3, 1, "b")}
    assert [r.partition for r in newly_owned(before, now, [0, 1, 2], "a")] == [0]


def test_balanced_wants_every_owner_caught_up_with_its_share() -> None:
    three = {p: row(p, 1, "abc"[p % 3]) for p in range(8)}
    assert balanced(three, ["a", "b", "c"], 8)
    assert shares(three)["c"] == [2, 5]
    assert not balanced(three, ["a", "b"], 8)
    assert not balanced(three, ["a", "b", "c"], 9)
    lopsided = {**three, 1: row(1, 2, "a"), 4: row(4, 2, "a")}  # a: 5, b: 1, c: 2
    assert not balanced(lopsided, ["a", "b", "c"], 8)
    behind = {**three, 0: row(0, 2, "a", caught_up=False)}
    assert not balanced(behind, ["a", "b", "c"], 8)
    uneven = {p: row(p, 1, "a" if p < 4 else "b" if p < 7 else "c") for p in range(8)}
    assert not balanced(uneven, ["a", "b", "c"], 8)
    # 8 logical partitions over 4 Kafka ones: the group gives 2 Kafka partitions to one owner
    # and 1 to each other, 4 logical ones against 2 (issue 34).
    by_kafka = {p: row(p, 1, "aabc"[p % 4]) for p in range(8)}
    assert not balanced(by_kafka, ["a", "b", "c"], 8)
    assert balanced(by_kafka, ["a", "b", "c"], 8, per_kafka=2)


def test_takeover_figures_from_the_instants() -> None:
    t = takeover("SIGKILL share", began=1000.0, partitions=4, epochs_at=1010.6,
                 caught_up_at=1011.0, taken_at=[1010.5, 1010.4, None, 1010.45],
                 takes=[LoggedTake(1011.0, "b", (0, 1), 0.5),
                        LoggedTake(1011.0, "c", (2, 3), 0.6)])
    assert t.seconds_to_epochs == 10.6
    assert t.seconds_to_caught_up == 11.0
    assert t.ms_per_partition == 2750.0
    assert t.seconds_to_first_epoch == 10.4
    assert t.seconds_after_first_epoch == 0.6
    assert t.longest_logged_take == 0.6
    assert t.logged_partitions == 4


def test_a_takeover_not_seen_in_time_has_no_figures() -> None:
    t = takeover("cold start", 0.0, 8, None, None, [], [])
    assert t.seconds_to_caught_up is None and t.ms_per_partition is None
    assert t.seconds_to_first_epoch is None and t.longest_logged_take is None


def test_verdict_names_a_missed_target() -> None:
    fast = takeover("SIGTERM share", 0.0, 342, 0.5, 1.2, [0.3], [])
    slow = takeover("SIGKILL share", 0.0, 342, 12.0, 12.5, [10.0], [])
    text = target_verdict(1024, fast, slow)
    assert "SIGTERM share of 342 1.20 s, met" in text
    assert "after detection 2.50 s, MISSED" in text
    assert "issue's target" in text
    assert "shown for comparison" in target_verdict(8, fast, fast)


def test_takeover_plan_pairs_counts() -> None:
    assert takeover_plan((8, 1024), (1000, 10_000)) == ((8, 1000), (1024, 10_000))
    assert takeover_plan((8, 1024), (0,)) == ((8, 0), (1024, 0))
    with pytest.raises(ValueError, match="--takeover-jobs"):
        takeover_plan((8, 1024), (1, 2, 3))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_takeover_options() -> None:
    options = from_namespace(parse("--workloads", "takeover", "--takeover-partitions", "8,64",
                                   "--takeover-jobs", "50"))
    assert options.workloads == ("takeover",)
    assert options.takeover_partitions == (8, 64)
    assert options.takeover_jobs == (50,)
    with pytest.raises(SystemExit):
        parse("--takeover-partitions", "0,8")
    with pytest.raises(SystemExit):
        parse("--takeover-jobs", "many")
    with pytest.raises(SystemExit, match="--takeover-jobs"):
        from_namespace(parse("--takeover-partitions", "8,64", "--takeover-jobs", "1,2,3"))


def test_takeover_rows_and_json() -> None:
    cold = takeover("cold start", 0.0, 8, 0.9, 1.0, [0.8], [LoggedTake(1.0, "a", (0,), 0.1)])
    share = takeover("SIGTERM share", 0.0, 3, 0.1, 0.2, [0.05], [])
    kill = takeover("SIGKILL share", 0.0, 3, 10.1, 10.4, [10.0], [])
    result = TakeoverResult("cronlog", [TakeoverRun(8, 100, 100, 10.0, cold, share, kill,
                                                    "verdict")], "source")
    table = render_table(rows({"takeover": {"cronlog": result}}))
    cold_line = next(line for line in table.splitlines() if "cold start, all" in line)
    assert "1.00" in cold_line and cold_line.rstrip(" |").endswith("-")
    assert any("SIGKILL detection" in line and "10.00" in line for line in table.splitlines())
    doc = json.loads(json.dumps(to_jsonable({"takeover": {"cronlog": result}})))
    assert doc["takeover"]["cronlog"]["runs"][0]["sigkill"]["seconds_after_first_epoch"] == 0.4
