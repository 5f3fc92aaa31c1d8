"""A time zone compiled for schedule searches: its UTC offset changes over the accepted range,
found once per zone, so that a search maps local times to instants by arithmetic on whole
seconds instead of asking zoneinfo about each local time (issue 33).

Times here are whole seconds: an instant is seconds since the Unix epoch (UTC), a local time
is seconds since the local epoch (1970-01-01T00:00 wall time), and a local day is the day
number since that date. Offset changes in the zone database fall on whole seconds, and
every local time a cron expression names is a whole second.

Compiling probes the zone every PROBE_STEP over the range and bisects to the second where
the offset differs: at most PROBES probes and BISECTION_STEPS per change, once per zone
per process (ZONES_KEPT zones kept; there are about 600). Offset changes in the zone
database are at least 7 days apart from 1970 to 2100 (Gaza, Boa Vista: measured over
every zone with 12-hourly probes, which domain/schedule.py and missed_fire_times.py assume
as well), so probes 6 days apart see each one.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import pairwise
from zoneinfo import ZoneInfo

DAY = 86_400
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# The probed span: the accepted range (domain/bounds.py) and two weeks either side, farther
# than any search looks past it (a day, and offsets below 26 hours).
FIRST_PROBE = -14 * DAY
LAST_PROBE = (datetime(2100, 1, 15, tzinfo=UTC) - EPOCH) // timedelta(seconds=1)
PROBE_STEP = 6 * DAY
PROBES = (LAST_PROBE - FIRST_PROBE) // PROBE_STEP + 2
BISECTION_STEPS = PROBE_STEP.bit_length()
ZONES_KEPT = 1024
# No UTC offset reaches this far: a local day's instants lie within it of its wall times.
WIDEST_OFFSET = 26 * 3600


def seconds_of(instant: datetime) -> int:
    """An aware instant as whole seconds since the epoch, rounded down: an instant made of
    whole seconds is after `instant` exactly when it is after this."""
    return (instant - EPOCH) // timedelta(seconds=1)


def instant_of(seconds: int) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


def _offset_at(zone: ZoneInfo, seconds: int) -> int:
    offset = datetime.fromtimestamp(seconds, zone).utcoffset()
    assert offset is not None  # a ZoneInfo always has one
    return offset.days * DAY + offset.seconds


@dataclass(frozen=True)
class CompiledZone:
    """The zone's offsets as stretches: offsets[i] holds before changes[i] (from
    changes[i - 1]); offsets[-1] after the last change."""

    zone: ZoneInfo
    changes: tuple[int, ...]
    offsets: tuple[int, ...]
    # Local days next to an offset change whose gap or repeated span reaches over midnight
    # (Samoa skipped a whole day in 2011): a fire time there may fall on another local day,
    # so these days are never skipped unseen (domain/schedule_search.py).
    midnight_days: frozenset[int] = field(default=frozenset())

    def offset_at(self, seconds: int) -> int:
        """The UTC offset in seconds at an instant (seconds since the epoch)."""
        return self.offsets[bisect_right(self.changes, seconds)]

    def local_day(self, seconds: int) -> int:
        """The local day of the instant `seconds` (or of any instant in the second after)."""
        return (seconds + self.offset_at(seconds)) // DAY

    def stretches(self, day: int) -> tuple[int, int]:
        """The indexes first..last of the stretches that may hold the local day's times:
        equal when one offset holds all around the day."""
        start = day * DAY
        return (bisect_right(self.changes, start - WIDEST_OFFSET),
                bisect_right(self.changes, start + DAY + WIDEST_OFFSET))

    def stretch(self, index: int) -> tuple[int | None, int | None, int]:
        """Stretch `index`: the instants it starts and ends at (None: unbounded) and its
        offset."""
        changes = self.changes
        return (changes[index - 1] if index > 0 else None,
                changes[index] if index < len(changes) else None, self.offsets[index])

    def first_instant_of(self, day: int) -> int:
        """The instant from which the local date is `day` or later for good (as
        exclusions.first_instant_of): where midnight falls in a gap, the gap's end; where it
        occurs twice, the first occurrence unless an instant of the day before follows it."""
        midnight = day * DAY
        first, last = self.stretches(day - 1)
        instants: list[int] = []
        gap_end: int | None = None
        for index in range(first, last + 1):
            start, end, offset = self.stretch(index)
            instant = midnight - offset
            if (start is None or instant >= start) and (end is None or instant < end):
                instants.append(instant)
            elif gap_end is None and start is not None and instant < start:
                gap_end = start
        if not instants:
            assert gap_end is not None
            return gap_end
        instants.sort()
        for instant, later in pairwise(instants):
            if self.local_day(later - 1) >= day:
                return instant
        return instants[-1]


def _changes(zone: ZoneInfo) -> tuple[list[int], list[int]]:
    changes: list[int] = []
    offsets: list[int] = []
    low = FIRST_PROBE
    offset = _offset_at(zone, low)
    while low < LAST_PROBE:
        high = low + PROBE_STEP
        high_offset = _offset_at(zone, high)
        # Several changes between two probes cannot hide (they are 7 days apart or more),
        # but one found is checked against the probe's offset all the same.
        while high_offset != offset:
            before, after = low, high  # the offset is `offset` at `before`, not at `after`
            while after - before > 1:
                mid = (before + after) // 2
                if _offset_at(zone, mid) == offset:
                    before = mid
                else:
                    after = mid
            changes.append(after)
            offsets.append(offset)
            offset = _offset_at(zone, after)
            low = after
        low = high
    offsets.append(offset)
    return changes, offsets


def _midnight_days(changes: list[int], offsets: list[int]) -> frozenset[int]:
    days: set[int] = set()
    for index, change in enumerate(changes):
        before = (change - 1 + offsets[index]) // DAY  # the last wall time before it
        after = (change + offsets[index + 1]) // DAY   # the first one after it
        if before != after:
            days.update(range(min(before, after) - 1, max(before, after) + 2))
    return frozenset(days)


@lru_cache(maxsize=ZONES_KEPT)
def compiled_zone(zone: ZoneInfo) -> CompiledZone:
    """The zone compiled: at most PROBES + BISECTION_STEPS per offset change reads of the
    zone (a few milliseconds), once per zone."""
    changes, offsets = _changes(zone)
    return CompiledZone(zone, tuple(changes), tuple(offsets), _midnight_days(changes, offsets))
