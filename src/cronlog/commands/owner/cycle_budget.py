"""How long one owner cycle may spend deciding (issue 33, DESIGN invariant 12).

Whatever tenants send (a CreateJobs of 1,000 expensive schedules, a calendar followed by
10,000 jobs, a burst of due jobs), an owner cycle decides for about its budget and then
commits what it has decided: its consumer keeps polling (max.poll.interval is never
reached by deciding), its transaction stays small, and the other tenants' runs of its
partitions fire on time. The budget is checked between inbox messages and between due
jobs, never inside one; each of those is bounded on its own (a next fire time is at most
ScheduleTooCostly's step count, domain/schedule_search.py).

- The inbox's messages are decided while less than MESSAGES_SHARE of the budget is spent;
  the rest of what the cycle polled is not decided. The owner hands it back to its
  transport (OwnerTransport.put_back), which keeps each partition's committed position at
  its first undecided message and hands those out first to the next cycle, in order: each
  inbox message is decided once, in its partition's order (exactly once with the
  transaction's offsets).
- Due jobs are then fired while less than the whole budget is spent; the rest stay due for
  the next cycle, which fires them a lookahead ahead of their time all the same.
- Each tenant decides for at most TENANT_SHARE of the budget a cycle (commands/
  inbox_shares.py): its messages past that are deferred to the next cycle like those the
  budget left, so a cycle one tenant keeps busy stays short and another tenant's command
  waits one such cycle, not the busy tenant's whole queue.
- Calendar followers (commands/owner/calendar_followers.py) are applied last, for at most
  FOLLOWERS_SHARE of the budget: their events make the commit and the apply longer too.
- Each cycle decides at least its first message and fires at least its first due job, so
  the owner always moves on; a cycle overruns its budget by at most one message or job.

Time is the owner's monotonic clock, passed in (the domain and the commands never read a
clock themselves). Cycles that hit the budget are counted (OwnerMetrics, the owner's
periodic log line)."""

from __future__ import annotations

from collections.abc import Callable

# The part of the budget the inbox's messages may use: the rest is the due jobs' (a tenant
# flooding the inbox does not hold back the partitions' fire times).
MESSAGES_SHARE = 0.5
# The part of the budget one tenant's messages may use a cycle. A cycle's commit and
# Postgres apply grow with what it decided (about as long again), so a cycle one tenant
# fills lasts about twice this, and another tenant's command waits that and its own cycle.
# A twentieth (tried 8 December 2026) made the other tenant's CreateJob beside the CreateJobs
# search bomb a little faster, but a tenant alone with costly commands and a small budget
# then crawled: 1,000 bomb creates under a 20 ms budget took over 120 s (tests/e2e/
# test_cycle_budget.py), one create a cycle. docs/development.md has the figures.
TENANT_SHARE = 0.2
# The part of the budget the calendar followers applied in a cycle may use.
FOLLOWERS_SHARE = 0.2


class CycleBudget:
    def __init__(self, seconds: float, monotonic: Callable[[], float],
                 tenant_share: float | None = TENANT_SHARE) -> None:
        """tenant_share: the part of the budget one tenant's messages may use a cycle;
        None: tenants are not shared, the budget alone bounds them (tests of the budget)."""
        if seconds <= 0:
            raise ValueError(f"a cycle's budget must be positive, got {seconds}")
        if tenant_share is not None and not 0 < tenant_share <= 1:
            raise ValueError(f"a tenant's share of a cycle must be in (0, 1], got {tenant_share}")
        self.seconds = seconds
        self._tenant_share = tenant_share
        self._monotonic = monotonic
        self._began = 0.0
        # Whether the cycle under way stopped taking work for its budget.
        self.hit = False

    @property
    def tenant_share(self) -> float | None:
        """Seconds one tenant's messages may take a cycle (None: not shared)."""
        return None if self._tenant_share is None else self.seconds * self._tenant_share

    @property
    def followers_share(self) -> float:
        return self.seconds * FOLLOWERS_SHARE

    def share_spent(self, seconds: float) -> Callable[[], bool]:
        """From now: whether `seconds` are spent, or the whole budget."""
        began = self._monotonic()

        def spent() -> bool:
            # Not a hit of the budget: the cycle goes on with other work.
            return self._monotonic() - began >= seconds or self.spent()

        return spent

    def begin(self, began: float) -> None:
        """A cycle that began (its poll returned) at `began`, monotonic seconds."""
        self._began = began
        self.hit = False

    def _over(self, seconds: float) -> bool:
        if self._monotonic() - self._began >= seconds:
            self.hit = True
            return True
        return False

    def messages_spent(self) -> bool:
        """Whether the inbox's share of the budget is spent: decide no more messages."""
        return self._over(self.seconds * MESSAGES_SHARE)

    def spent(self) -> bool:
        """Whether the whole budget is spent: fire no more due jobs."""
        return self._over(self.seconds)

