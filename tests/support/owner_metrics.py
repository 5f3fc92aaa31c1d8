"""An OwnerMetrics that keeps what the owner tells it."""

from __future__ import annotations

from dataclasses import dataclass, field

from cronlog.commands.owner.ports import CycleFigures


@dataclass
class Told:
    """An OwnerMetrics that keeps what it is told."""

    cycles: list[CycleFigures] = field(default_factory=list)
    claimed: list[int] = field(default_factory=list)
    catch_ups: list[tuple[int, float]] = field(default_factory=list)

    def cycle(self, figures: CycleFigures) -> None:
        self.cycles.append(figures)

    def partitions_claimed(self, count: int) -> None:
        self.claimed.append(count)

    def caught_up(self, partitions: int, seconds: float) -> None:
        self.catch_ups.append((partitions, seconds))
