"""Takeovers: each claimed partition is handed back once, as soon as it has caught up; a
partition dropped or claimed again meanwhile is not handed back by the old catch-up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cronlog.commands.owner.ports import Claim
from cronlog.commands.owner.takeovers import Takeovers


@dataclass
class ScriptedCatchUp:
    """Catches up the given partitions at the given advances (one list per call)."""

    claims: dict[int, Claim]
    script: list[list[int]]
    closed: bool = False
    budgets: list[float] = field(default_factory=list)

    def advance(self, seconds: float) -> list[Claim]:
        self.budgets.append(seconds)
        ready = self.script.pop(0) if self.script else []
        return [self.claims.pop(p) for p in ready if p in self.claims]

    @property
    def finished(self) -> bool:
        return not self.claims

    def close(self) -> None:
        self.closed = True


@dataclass
class ScriptedReplay:
    scripts: list[list[list[int]]]
    started: list[ScriptedCatchUp] = field(default_factory=list)

    def start(self, claims: Sequence[Claim]) -> ScriptedCatchUp:
        catch_up = ScriptedCatchUp({c.partition: c for c in claims}, self.scripts.pop(0))
        self.started.append(catch_up)
        return catch_up


def claims(*partitions: int, epoch: int = 1) -> list[Claim]:
    return [Claim(p, epoch, 0, 0) for p in partitions]


def test_each_partition_is_handed_back_as_soon_as_it_has_caught_up() -> None:
    clock = [0.0]
    replay = ScriptedReplay([[[2], [], [0, 1]]])
    takeovers = Takeovers(replay, lambda: clock[0])
    takeovers.start(claims(0, 1, 2))
    assert takeovers, "claimed, not caught up yet"
    clock[0] = 0.3
    [first] = takeovers.advance(0.25)
    assert [c.partition for c in first.claims] == [2] and first.seconds == 0.3
    assert takeovers.advance(0.25) == []
    [last] = takeovers.advance(0.25)
    assert [c.partition for c in last.claims] == [0, 1]
    assert not takeovers and replay.started[0].closed, "a finished catch-up is closed"


def test_a_partition_dropped_or_claimed_again_is_not_handed_back_by_the_old_catch_up() -> None:
    replay = ScriptedReplay([[[0, 1, 2]], [[1]]])
    takeovers = Takeovers(replay)
    takeovers.start(claims(0, 1, 2))
    takeovers.drop({0})
    # Partition 1 is claimed again (a resync): only the new claim's catch-up counts.
    takeovers.drop({1})
    takeovers.start(claims(1, epoch=2))
    handed = [c for found in takeovers.advance(0.25) for c in found.claims]
    assert sorted((c.partition, c.epoch) for c in handed) == [(1, 2), (2, 1)]
    assert not takeovers


def test_dropping_every_partition_of_a_catch_up_closes_it() -> None:
    replay = ScriptedReplay([[[]]])
    takeovers = Takeovers(replay)
    takeovers.start(claims(0, 1))
    takeovers.drop({0, 1})
    assert replay.started[0].closed and not takeovers
    takeovers.start([])
    assert not takeovers, "nothing claimed, nothing to catch up"
