"""When a failed delivery is tried again, and when it is given up; its stable id.

The plan, in full (RetryPlan):

- **Windows that double, up to a cap.** Window n (n = 1, 2, ...) is `min(cap, base * 2**(n-1))`
  long; the windows follow each other from the first attempt, so window n opens at
  `first_at + (the lengths of windows 1 to n-1)`.
- **Full jitter.** After attempt n fails, attempt n+1 is at a uniformly drawn point of
  window n (the injected random source draws it): receivers that failed together are not
  retried together. Anchoring the windows on the first attempt, not on the last one, keeps
  the schedule whatever an attempt's own duration was.
- **Bounded in time.** No attempt is planned after `first_at + give_up_after`: a window
  that reaches past it is cut there, and once the next window would open at or after it,
  next_attempt_at answers None: the delivery is failed, which is its own dead letter
  (give_up_after = 0: one attempt, no retry).
- **Bounded in count.** A plan allows at most `max_attempts` attempts (computed from its
  durations); one whose durations would allow more than MAX_PLANNED_ATTEMPTS is refused.

The delivery id is uuid5 of the alert's and the channel's ids: the same on every attempt
and on every notifier, so a receiver (webhook-id) recognises a retry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID, uuid5

from cronlog.notifications.model import AlertMessage, Delivery, RandomSource

DELIVERY_NAMESPACE = UUID("c4d1a7e2-5b39-4f0e-8a6c-3e2f9b1d7a58")
MICROSECOND = timedelta(microseconds=1)
LONGEST = timedelta.max
# However a plan is configured, one delivery is never attempted more often than this, nor
# for longer: an alert a month old helps nobody.
MAX_PLANNED_ATTEMPTS = 1_000
LONGEST_RETRYING = timedelta(days=31)


def delivery_id(alert_id: UUID, channel_id: UUID) -> UUID:
    """The delivery of an alert to a channel: the same on every attempt (webhook-id)."""
    return uuid5(DELIVERY_NAMESPACE, alert_id.hex + channel_id.hex)


def first_delivery(alert: AlertMessage, channel_id: UUID, due_at: datetime) -> Delivery:
    """Attempt 1 of the alert's delivery to the channel, due at `due_at`."""
    return Delivery(delivery_id(alert.alert_id, channel_id), channel_id, alert, due_at)


@dataclass(frozen=True)
class RetryPlan:
    """Exponential backoff (factor 2) from `base` up to `cap`, with full jitter, for at most
    `give_up_after` after the first attempt. The defaults: 5 s, then 10 s, 20 s, ... up to
    windows of an hour, for a day (34 attempts)."""

    base: timedelta = timedelta(seconds=5)
    cap: timedelta = timedelta(hours=1)
    give_up_after: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        if self.base < MICROSECOND:
            raise ValueError(f"retry base: at least 1 µs, not {self.base}")
        if self.cap < self.base:
            raise ValueError(f"retry cap: at least the base ({self.base}), not {self.cap}")
        if not timedelta(0) <= self.give_up_after <= LONGEST_RETRYING:
            raise ValueError(f"retry give_up_after: 0 to {LONGEST_RETRYING}, "
                             f"not {self.give_up_after}")
        if self.max_attempts > MAX_PLANNED_ATTEMPTS:
            raise ValueError(f"retry plan: {self.max_attempts} attempts within "
                             f"{self.give_up_after} of windows up to {self.cap}; at most "
                             f"{MAX_PLANNED_ATTEMPTS} (a longer cap or a shorter time)")

    @property
    def max_attempts(self) -> int:
        """The most attempts the plan makes: the first, and one per window that opens before
        the give-up time. At most log2(cap / base) + 1 loop steps."""
        limit = self.give_up_after // MICROSECOND
        base, cap = self.base // MICROSECOND, self.cap // MICROSECOND
        opened, window = 0, base  # the next window opens `opened` µs after the first attempt
        attempts = 1
        while window < cap:  # at most log2(cap / base) + 1 doublings
            if opened >= limit:
                return attempts
            attempts += 1
            opened += window
            window *= 2
        if opened >= limit:
            return attempts
        return attempts + (limit - opened - 1) // cap + 1

    def window(self, attempt: int) -> tuple[timedelta, timedelta]:
        """Window `attempt` as (opens after, length), both from the first attempt (the
        opening at most timedelta.max). O(log2(cap / base)) steps at most."""
        if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
            raise ValueError(f"attempt: a number from 1, not {attempt!r}")
        base, cap = self.base // MICROSECOND, self.cap // MICROSECOND
        opened, window, n = 0, base, 1
        while window < cap and n < attempt:  # at most log2(cap / base) + 1 steps
            opened += window
            window *= 2
            n += 1
        window = min(window, cap)
        opened = min(opened + (attempt - n) * cap, LONGEST // MICROSECOND)
        return opened * MICROSECOND, window * MICROSECOND

    def next_attempt_at(self, attempt: int, first_at: datetime,
                        rng: RandomSource) -> datetime | None:
        """When attempt `attempt + 1` is due, attempt `attempt` having failed; None when the
        delivery is to be given up (its window would open at or after the give-up time)."""
        opens_after, length = self.window(attempt)
        if opens_after >= self.give_up_after:
            return None
        length = min(length, self.give_up_after - opens_after)
        draw = rng.random()
        if not 0.0 <= draw <= 1.0:
            raise ValueError(f"random source: a draw in [0, 1), not {draw!r}")
        jitter = int(draw * (length // MICROSECOND)) * MICROSECOND
        return first_at + opens_after + min(jitter, length)

    def gives_up_at(self, first_at: datetime) -> datetime:
        """No attempt of a delivery first attempted at `first_at` is planned after this."""
        return first_at + self.give_up_after
