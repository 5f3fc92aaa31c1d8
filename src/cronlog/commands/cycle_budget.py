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


class CycleBudget:
    def __init__(self, seconds: float, monotonic: Callable[[], float]) -> None:
        if seconds <= 0:
            raise ValueError(f"a cycle's budget must be positive, got {seconds}")
        self.seconds = seconds
        self._monotonic = monotonic
        self._began = 0.0
        # Whether the cycle under way stopped taking work for its budget.
        self.hit = False

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

