"""The takeover workload's figures from plain values: the schedulers' `took partitions` log
lines, snapshots of the partition_owners table, and the instants the bench observed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

# The target: a whole scheduler's share of 1,024 partitions taken in under 2 s when
# there is little to replay.
TARGET_SECONDS = 2.0
TARGET_PARTITIONS = 1024

# PartitionOwner's line, under cli.py's log format ("%(asctime)s %(levelname)s ...").
_TAKE_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?owner (?P<owner>\S+) took partitions "
    r"\[(?P<partitions>[\d, ]*)\] at epochs \[(?P<epochs>[\d, ]*)\] in (?P<seconds>\d+(?:\.\d+)?)s")


@dataclass(frozen=True)
class LoggedTake:
    """One takeover as the scheduler that took the partitions logged it."""

    # When the line was written (epoch seconds, the machine's clock): the take's end.
    at: float
    owner: str
    partitions: tuple[int, ...]
    seconds: float


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",") if i.strip())


def parse_takes(lines: Iterable[str]) -> list[LoggedTake]:
    """The take lines among a scheduler log's lines; the asctime is local time, as the
    logging module writes it."""
    takes = []
    for line in lines:
        m = _TAKE_LINE.match(line)
        if m is None:
            continue
        at = datetime.strptime(m["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        takes.append(LoggedTake(at, m["owner"], _ints(m["partitions"]), float(m["seconds"])))
    return takes


@dataclass(frozen=True)
class OwnerRow:
    """One partition_owners row as the bench read it."""

    partition: int
    epoch: int
    owner: str | None
    # The owner recorded that it caught up at this epoch.
    caught_up: bool
    # When this epoch was taken (Postgres' clock, the same machine's), epoch seconds.
    taken_at: float | None


def newly_owned(before: Mapping[int, OwnerRow], now: Mapping[int, OwnerRow],
                partitions: Iterable[int], leaving: str | None) -> list[OwnerRow]:
    """Rows of `partitions` that another owner than `leaving` took at a newer epoch than in
    `before`."""
    out = []
    for p in partitions:
        row, old = now.get(p), before.get(p)
        if row is None or row.owner is None or row.owner == leaving:
            continue
        if old is None or row.epoch > old.epoch:
            out.append(row)
    return out


def shares(rows: Mapping[int, OwnerRow]) -> dict[str, list[int]]:
    """Partitions by owner."""
    out: dict[str, list[int]] = {}
    for row in sorted(rows.values(), key=lambda r: r.partition):
        if row.owner is not None:
            out.setdefault(row.owner, []).append(row.partition)
    return out


def balanced(rows: Mapping[int, OwnerRow], owners: Sequence[str], partitions: int,
             per_kafka: int = 1) -> bool:
    """Every partition owned by one of `owners` and caught up, each owner with its share
    (the counts at most one Kafka partition apart), as the group's sticky assignor ends up.
    The rows are logical partitions, `per_kafka` of them to a Kafka partition, which is what
    the group assigns (docs/partitions.md)."""
    if len(rows) != partitions or not all(r.caught_up for r in rows.values()):
        return False
    by_owner = shares(rows)
    if set(by_owner) != set(owners):
        return False
    counts = [len(v) for v in by_owner.values()]
    return max(counts) - min(counts) <= per_kafka


@dataclass(frozen=True)
class Takeover:
    """One measured takeover: a cold start, or a scheduler's share moving to the others."""

    kind: str
    partitions: int
    # From the start (process start, or the signal) until every one of the partitions had
    # a new epoch in Postgres, and until every one had a caught-up owner there; None: not
    # within the bench's wait.
    seconds_to_epochs: float | None
    seconds_to_caught_up: float | None
    # seconds_to_caught_up divided by the partitions.
    ms_per_partition: float | None
    # From the start to the first new epoch: the process starting and joining the group
    # (cold start), the group noticing (SIGTERM, SIGKILL: the session timeout).
    seconds_to_first_epoch: float | None
    # From the first new epoch to every partition caught up: the takeover proper.
    seconds_after_first_epoch: float | None
    # What the taking schedulers logged, one per take line; they take in parallel, so the
    # longest is the share's.
    logged_take_seconds: tuple[float, ...]
    logged_partitions: int

    @property
    def longest_logged_take(self) -> float | None:
        return max(self.logged_take_seconds, default=None)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def takeover(kind: str, began: float, partitions: int, epochs_at: float | None,
             caught_up_at: float | None, taken_at: Sequence[float | None],
             takes: Sequence[LoggedTake]) -> Takeover:
    """The figures of one takeover that began at `began`; epochs_at and caught_up_at are
    when the bench saw every partition with a new epoch and caught up (None: never),
    taken_at the new epochs' Postgres times, takes the taking schedulers' lines since."""
    first = min((t for t in taken_at if t is not None), default=None)
    to_caught_up = None if caught_up_at is None else caught_up_at - began
    return Takeover(
        kind=kind, partitions=partitions,
        seconds_to_epochs=_round(None if epochs_at is None else epochs_at - began),
        seconds_to_caught_up=_round(to_caught_up),
        ms_per_partition=_round(None if to_caught_up is None or not partitions
                                else to_caught_up / partitions * 1000),
        seconds_to_first_epoch=_round(None if first is None else first - began),
        seconds_after_first_epoch=_round(None if first is None or caught_up_at is None
                                         else max(0.0, caught_up_at - first)),
        logged_take_seconds=tuple(t.seconds for t in takes),
        logged_partitions=sum(len(t.partitions) for t in takes))


def target_verdict(partitions: int, share: Takeover, after_detection: Takeover) -> str:
    """Whether a whole share moved within the target: the SIGTERM share from the signal to
    every partition caught up, and the SIGKILL share from its first new epoch (once the
    group noticed) to the last caught up."""
    def judged(seconds: float | None) -> str:
        if seconds is None:
            return "not measured"
        return f"{seconds:.2f} s, {'met' if seconds < TARGET_SECONDS else 'MISSED'}"

    scope = ("the issue's target" if partitions >= TARGET_PARTITIONS
             else f"the target is for {TARGET_PARTITIONS:,} partitions; shown for comparison")
    return (f"{partitions:,} partitions, target a share in < {TARGET_SECONDS:.0f} s ({scope}): "
            f"SIGTERM share of {share.partitions:,} {judged(share.seconds_to_caught_up)}; "
            f"SIGKILL share of {after_detection.partitions:,} after detection "
            f"{judged(after_detection.seconds_after_first_epoch)}")
