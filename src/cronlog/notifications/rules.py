"""How many of a job's alerts get through (Throttle). Which alerts a job wants, its notify
rule, is the domain's (domain/notify_rule.py).

The throttle, in full:

- **One message per job and kind per interval.** The first alert of a (tenant, job, kind)
  goes out and opens a window of `interval`; the alerts of that key within the window are
  counted, not sent.
- **A digest when the window ends.** A window that ends with N alerts counted sends one
  digest alert ("N more failures since 14:02:11Z", digest_count N) and opens the next
  window, so that the digest too is the key's one message of its interval. A window that
  ends with none counted is forgotten: the key's next alert goes out at once.
- **Bounded memory.** At most `max_keys` windows are kept. A new key when all are taken
  first flushes the windows that have ended; if none has, the oldest window is evicted
  and its digest, if it counted any, is sent at once. An evicted key's next alert goes out
  at once: under that pressure a key may get more than one message per interval, never
  fewer, and no alert is lost without being counted in a digest.

Pure: `now` is passed in, and a `now` earlier than one already seen counts as that one.
Cost: offer() is O(1) plus what flush() does; flush() visits the ended windows only, at
most `max_keys` of them."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid5

from cronlog.notifications.model import KIND_TEXT, AlertMessage, AnyKind

SHORTEST_INTERVAL = timedelta(seconds=1)
LONGEST_INTERVAL = timedelta(days=1)
DIGEST_NAMESPACE = UUID("8e3b5f71-2c4d-4a9e-b6f0-5d1c7a2e9b34")


ThrottleKey = tuple[str, UUID, AnyKind]


@dataclass
class _Window:
    opened: datetime
    latest: AlertMessage
    counted: int = 0


class Throttle:
    """At most one alert per (tenant, job, kind) per `interval`, the rest folded into digests;
    at most `max_keys` keys remembered. Call offer() for each alert and flush() on a timer
    (next_flush_at says when); send what they return."""

    def __init__(self, interval: timedelta, max_keys: int) -> None:
        if not SHORTEST_INTERVAL <= interval <= LONGEST_INTERVAL:
            raise ValueError(f"throttle interval: {SHORTEST_INTERVAL} to {LONGEST_INTERVAL}, "
                             f"not {interval}")
        if max_keys < 1:
            raise ValueError(f"throttle max_keys: 1 or more, not {max_keys}")
        self.interval = interval
        self.max_keys = max_keys
        # Oldest window first: windows open in the order of `now`, which never goes back.
        self._windows: OrderedDict[ThrottleKey, _Window] = OrderedDict()
        self._now: datetime | None = None

    def __len__(self) -> int:
        return len(self._windows)

    def offer(self, alert: AlertMessage, now: datetime) -> list[AlertMessage]:
        """What to send now: the digests of the windows ended by now, and the alert itself
        unless its key's window is open (then it is counted). A new key when `max_keys`
        windows are open evicts the oldest, whose digest, if any, comes first."""
        now = self._advance(now)
        sent = self.flush(now)
        key = (alert.tenant, alert.job_id, alert.kind)
        window = self._windows.get(key)
        if window is not None:
            window.counted += 1
            window.latest = alert
            return sent
        if len(self._windows) >= self.max_keys:
            evicted_key, evicted = self._windows.popitem(last=False)
            if evicted.counted:
                sent.append(self._digest(evicted_key, evicted, now))
        self._windows[key] = _Window(now, alert)
        sent.append(alert)
        return sent

    def flush(self, now: datetime) -> list[AlertMessage]:
        """The digests of the windows ended by now; each such window with alerts counted opens
        the next one, the others are forgotten. Visits the ended windows only (at most
        `max_keys`): each is moved behind the open ones, or dropped."""
        now = self._advance(now)
        sent: list[AlertMessage] = []
        windows = self._windows
        while windows:
            key, window = next(iter(windows.items()))
            if window.opened + self.interval > now:
                break
            del windows[key]
            if window.counted:
                sent.append(self._digest(key, window, now))
                windows[key] = _Window(now, window.latest)
        return sent

    def next_flush_at(self) -> datetime | None:
        """When the oldest open window ends: the next flush() with anything to do."""
        if not self._windows:
            return None
        return next(iter(self._windows.values())).opened + self.interval

    def _advance(self, now: datetime) -> datetime:
        if self._now is None or now > self._now:
            self._now = now
        return self._now

    def _digest(self, key: ThrottleKey, window: _Window, now: datetime) -> AlertMessage:
        tenant, job_id, kind = key
        words = KIND_TEXT[kind]
        since = window.opened.astimezone(UTC)
        shown = (since.strftime("%H:%M:%SZ") if since.date() == now.astimezone(UTC).date()
                 else since.strftime("%Y-%m-%dT%H:%M:%SZ"))
        noun = words.one if window.counted == 1 else words.many
        digest_id = uuid5(DIGEST_NAMESPACE,
                          f"{tenant}\x00{job_id}\x00{kind.value}\x00{since.isoformat()}")
        return AlertMessage(
            alert_id=digest_id, tenant=tenant, kind=kind, job_id=job_id,
            job_name=window.latest.job_name, run_id=None, attempt=None,
            message=f"{window.counted} more {noun} since {shown}", at=now,
            digest_count=window.counted)
