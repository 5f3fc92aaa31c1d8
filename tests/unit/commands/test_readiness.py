"""Readiness from the group's assignment and the owners' records: a record that names
another member (a dead owner, a predecessor) never counts."""

from __future__ import annotations

from collections.abc import Mapping

from cronlog.commands.api.ports import GroupMember, OwnerRecord
from cronlog.commands.api.readiness import ReadinessWatch, readiness
from cronlog.domain.partition_layout import PartitionLayout
from cronlog.ports import LogUnavailable

A = GroupMember("member-a", "scheduler-1")
B = GroupMember("member-b", "scheduler-2")


def test_ready_when_every_partition_is_caught_up_by_the_member_holding_it() -> None:
    found = readiness(2, {0: A, 1: B}, {0: OwnerRecord("scheduler-1", "member-a"),
                                        1: OwnerRecord("scheduler-2", "member-b")})
    assert found.ready
    assert found.summary() == "all 2 inbox partitions have a caught-up scheduler"


def test_a_partition_without_a_member_or_caught_up_by_another_waits() -> None:
    found = readiness(4, {0: A, 1: B, 3: A},
                      {0: OwnerRecord("scheduler-1", "member-a"),
                       # Taken by B, not caught up yet.
                       1: OwnerRecord("scheduler-2", None),
                       # Caught up by a member that is gone: stale.
                       3: OwnerRecord("scheduler-0", "member-old")})
    assert not found.ready
    assert set(found.waiting) == {1, 2, 3}
    assert "no scheduler holds it" in found.explain(2)
    assert found.explain(1) == "partition 1: scheduler scheduler-2 is catching up with the log"
    assert "scheduler-1 is catching up" in found.explain(3)
    assert found.explain(0) == "partition 0 has a caught-up scheduler"
    assert found.summary().startswith("3 of 4 inbox partitions cannot decide commands yet; ")


def test_an_inbox_partition_waits_until_every_logical_partition_it_carries_caught_up() -> None:
    # Logical partitions 0, 2, 4, 6 ride on inbox partition 0 of 2 (issue 34).
    layout = PartitionLayout(8, 2)
    caught = {p: OwnerRecord("scheduler-1" if p % 2 == 0 else "scheduler-2",
                             "member-a" if p % 2 == 0 else "member-b") for p in range(8)}
    assert readiness(layout, {0: A, 1: B}, caught).ready
    assert readiness(layout, {0: A, 1: B}, caught).summary() == \
        "all 2 inbox partitions have a caught-up scheduler"
    behind = {**caught, 6: OwnerRecord("scheduler-1", None)}
    found = readiness(layout, {0: A, 1: B}, behind)
    assert set(found.waiting) == {0}
    assert found.explain(0) == "partition 0: scheduler scheduler-1 is catching up with the log"


def test_the_summary_groups_partitions_by_reason_and_stays_short() -> None:
    found = readiness(100, {}, {})
    summary = found.summary()
    assert summary.count("no scheduler holds it") == 1
    assert "partitions 0, 1, 2, 3, 4, 5, 6, 7 and 92 more" in summary


class _Group:
    def __init__(self) -> None:
        self.members: Mapping[int, GroupMember] = {}
        self.down = False

    def members_by_partition(self) -> Mapping[int, GroupMember]:
        if self.down:
            raise LogUnavailable("broker away")
        return self.members


class _Records:
    def __init__(self) -> None:
        self.records: Mapping[int, OwnerRecord] = {}

    def owner_records(self) -> Mapping[int, OwnerRecord]:
        return self.records


def test_the_watch_reports_each_change_and_unknown_is_not_ready() -> None:
    group, records = _Group(), _Records()
    changes: list[bool] = []
    watch = ReadinessWatch(1, group, records, changes.append)
    assert not watch.check().ready
    group.members, records.records = {0: A}, {0: OwnerRecord("scheduler-1", "member-a")}
    assert watch.check().ready
    watch.check()
    group.down = True
    assert not watch.check().ready
    assert "not known (broker away)" in watch.explain(0)
    assert changes == [False, True, False]
