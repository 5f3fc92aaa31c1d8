"""What each tenant may spend of the api (DESIGN invariant 12): token buckets for commands
and for expensive reads, and a share of the server's threads. Pure (no gRPC server): a clock is passed in;
infra/grpc/budget_interceptor.py applies it to every JobService call.

A tenant is whoever the call authenticated as; when the api runs open, whatever tenant the
request names (any client is every tenant then). Either way the name is only a key: the
bucket map holds at most MOST_TENANTS of them, the least recently used forgotten first (a
forgotten tenant starts again with a full bucket), and the share's counts hold only tenants
with a call running, at most the server's threads.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cronlog.commands.api.dead_letters import MOST_RUNS as MOST_REDRIVEN
from cronlog.domain.bounds import MOST_PREVIEWED
from cronlog.v1 import job_service_pb2 as pb

# Buckets kept at once: each is a few hundred bytes, so the map stays within a few MB
# whatever names an open api is sent.
MOST_TENANTS = 10_000
# A tenant named by an open request is a key of at most this many characters.
MOST_TENANT_CHARS = 128

# JobService's methods by what they cost, in the contract's names. Reads that cost more than
# a row by its key (schedule searches, pages of Postgres rows, ClickHouse history reads):
READS = frozenset({"PreviewSchedule", "ListJobs", "ListRuns", "GetRun", "ListCalendars",
                   "ListChannels", "ListAlertDeliveries", "VerifyHistory", "WhatIf"})
# Reads of one row by its key: only the share of the threads applies.
CHEAP = frozenset({"GetJob", "GetCalendar", "GetChannel"})
# Calls that send to the outside (TestChannel: one test alert to one of the tenant's
# channels) hold a server thread while the receiver answers, up to the sender's own
# timeouts (connecting and then the answer, each within CRONLOG_ALERT_HTTP_TIMEOUT_MS, for a
# webhook or Slack; 30 s for e-mail), and each one reaches a receiver: at most SEND_CALLS
# of them run at once in one api, one tenant's at most SEND_TENANT_CALLS, and a tenant
# starts at most SENDS_PER_MINUTE a minute (SEND_BURST at once), so a tenant can neither
# flood a receiver through cronlog nor hold more than one of the api's threads with them.
SENDS = frozenset({"TestChannel"})
SEND_CALLS = 8
SEND_TENANT_CALLS = 1
SENDS_PER_MINUTE = 10
SEND_BURST = 5
# Every other method sends commands to owners (one per item of a batch); a method the
# contract gains is charged as a command until it is named above.
COMMANDS = frozenset(
    m.name for m in pb.DESCRIPTOR.services_by_name["JobService"].methods) - READS - CHEAP \
    - SENDS

# Proofs from the event log (issue 38, commands/api/history_proofs.py): each reads up to
# MOST_RECORDS records of the log and decodes them under the interpreter lock, about two
# seconds of a core, and an api runs one at a time (others are refused, to retry). Heavy
# (below), and charged a default read burst: at the default rate a tenant starts one every
# 5 s at most, so no tenant keeps the api's one proof for itself.
PROOFS = frozenset({"VerifyHistory", "WhatIf"})
PROOF_READS = 500

# Reads whose work is the api's own CPU, under its one interpreter lock: a preview searches
# and explains up to 1,000 fire times (about 35 ms of a core with 541 excluded days). The
# thread share alone let one tenant run 16 of them at once: every other call then waited for
# the lock behind them (another tenant's GetJob took 1 s; the noisy-neighbour suite). At
# most HEAVY_CALLS of them run at once in one api, one tenant's at most HEAVY_TENANT_CALLS,
# and a preview costs a read per PREVIEW_TIMES_PER_READ fire times it asks for.
HEAVY = frozenset({"PreviewSchedule", *PROOFS})
# A page of more rows than this is heavy too: building a page of 1,000 fat rows (up to 3 MiB)
# is a second of a slow core under the lock, and eight of them at once kept another
# tenant's calls waiting 0.5-1 s on a slower 2-core machine however their bytes were charged
# after (READ_BYTES_PER_TOKEN): one at a time per tenant, the others wait their turn.
HEAVY_PAGE_ROWS = {"ListJobs": 100}
HEAVY_CALLS = 4
HEAVY_TENANT_CALLS = 1
PREVIEW_TIMES_PER_READ = 100
# A read also costs a read for every READ_BYTES_PER_TOKEN of its answer, charged after it
# (into debt): a page is bounded in bytes (3 MiB), not in what it costs the api to build it,
# and eight parallel ListJobs of fat rows (256 KiB payloads, 1,000 excluded days each: tens
# of MB a second decoded under the interpreter lock) made another tenant's calls wait over
# a second (at 64 KiB a read, the burst's ten pages at once still 0.6 s). A page of 3 MiB is
# 192 reads more (at the default rate a tenant reads about 1.6 MB a second of them); a page
# of 100 ordinary jobs a few.
READ_BYTES_PER_TOKEN = 16 * 1024

COMMAND_RATE, READ_RATE, TENANT_SHARE = "command_rate", "read_rate", "tenant_share"
HEAVY_SHARE = "heavy_share"
SEND_RATE, SEND_SHARE = "send_rate", "send_share"
# The only values the refusals metric's reason label takes.
REASONS = (COMMAND_RATE, READ_RATE, TENANT_SHARE, HEAVY_SHARE, SEND_RATE, SEND_SHARE)


class TokenBucket:
    """`rate` tokens a second up to `burst`; starts full. Not thread-safe on its own."""

    __slots__ = ("burst", "rate", "tokens", "updated")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("a token bucket needs a positive rate and burst")
        self.rate, self.burst = rate, float(burst)
        self.tokens, self.updated = float(burst), now

    def take(self, cost: float, now: float) -> float:
        """Takes `cost` tokens (at most the burst: a cost above it needs a full bucket) and
        returns 0; or takes nothing and returns the seconds until they would be there."""
        cost = min(cost, self.burst)
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        if self.tokens >= cost:
            self.tokens -= cost
            return 0.0
        return (cost - self.tokens) / self.rate

    def owe(self, cost: float, now: float) -> None:
        """Takes `cost` tokens after the fact, into debt: the next takes wait until it is
        paid back. The debt is bounded by what the calls can cost: a tenant's calls at once
        (its thread share) times the largest answer's charge (a 3 MiB page: 192)."""
        if now > self.updated:
            self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        self.tokens -= cost


class TenantBuckets:
    """One bucket per tenant, at most `most` of them (least recently used forgotten)."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float],
                 most: int = MOST_TENANTS) -> None:
        self.rate, self.burst = rate, burst
        self._clock = clock
        self._most = most
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, tenant: str, cost: float = 1.0) -> float:
        """0 when the tenant may go on; else the seconds to wait before asking again."""
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(tenant)
            if bucket is None:
                bucket = self._buckets[tenant] = TokenBucket(self.rate, self.burst, now)
                if len(self._buckets) > self._most:
                    self._buckets.popitem(last=False)
            else:
                self._buckets.move_to_end(tenant)
            return bucket.take(cost, now)

    def owe(self, tenant: str, cost: float) -> None:
        """Charges a tenant after the fact (what a read turned out to cost)."""
        with self._lock:
            bucket = self._buckets.get(tenant)
            if bucket is not None:
                bucket.owe(cost, self._clock())


class TenantShare:
    """At most `most` calls of one tenant running at once."""

    def __init__(self, most: int) -> None:
        if most <= 0:
            raise ValueError("a tenant share needs at least one call")
        self.most = most
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_threads(cls, threads: int, share: float) -> TenantShare:
        """share of the server's threads, at least one."""
        return cls(max(1, math.floor(threads * share)))

    def enter(self, tenant: str) -> bool:
        with self._lock:
            running = self._running.get(tenant, 0)
            if running >= self.most:
                return False
            self._running[tenant] = running + 1
            return True

    def leave(self, tenant: str) -> None:
        with self._lock:
            running = self._running.get(tenant, 0) - 1
            if running > 0:
                self._running[tenant] = running
            else:
                self._running.pop(tenant, None)

    def running(self, tenant: str) -> int:
        return self._running.get(tenant, 0)


class HeavyCalls:
    """At most `most` heavy calls running at once, one tenant's at most `per_tenant`."""

    def __init__(self, most: int = HEAVY_CALLS, per_tenant: int = HEAVY_TENANT_CALLS) -> None:
        if not 1 <= per_tenant <= most:
            raise ValueError(f"per_tenant {per_tenant} must be 1 to most {most}")
        self.most = most
        self.tenants = TenantShare(per_tenant)
        self._running = 0
        self._lock = threading.Lock()

    def enter(self, tenant: str) -> bool:
        with self._lock:
            if self._running >= self.most or not self.tenants.enter(tenant):
                return False
            self._running += 1
            return True

    def leave(self, tenant: str) -> None:
        with self._lock:
            self._running -= 1
            self.tenants.leave(tenant)

    @property
    def running(self) -> int:
        return self._running


@dataclass(frozen=True)
class Charge:
    """What a call costs: which bucket (None: none) and how many tokens."""

    kind: str | None
    cost: int = 1


def charge_of(method: str, request: Any) -> Charge:
    if method in SENDS:
        return Charge(SEND_RATE)
    if method == "RedriveDeadLetters":
        # One RedriveRun per run it may re-drive: its limit (0 is the most). A limit out of
        # bounds is refused as INVALID_ARGUMENT by the api, charged as the most.
        limit = getattr(request, "limit", 0)
        return Charge(COMMAND_RATE, limit if 0 < limit <= MOST_REDRIVEN else MOST_REDRIVEN)
    if method in COMMANDS:
        # A batch (CreateJobs) costs what it asks of the owners: one command per item.
        items = getattr(request, "items", None)
        return Charge(COMMAND_RATE, max(1, len(items)) if items is not None else 1)
    if method == "PreviewSchedule":
        # A count past the most a preview gives is refused as INVALID_ARGUMENT by the
        # servicer, not charged as if it were served (2**31 - 1 would be a tenant's reads
        # for days).
        count = min(getattr(request, "count", 0) or 10, MOST_PREVIEWED)
        return Charge(READ_RATE, max(1, math.ceil(count / PREVIEW_TIMES_PER_READ)))
    if method in PROOFS:
        return Charge(READ_RATE, PROOF_READS)
    if method in READS:
        return Charge(READ_RATE)
    return Charge(None)


def read_bytes_charge(response: Any) -> int:
    """The reads an answer costs beyond its call's own: one per READ_BYTES_PER_TOKEN."""
    size = getattr(response, "ByteSize", None)
    return int(size()) // READ_BYTES_PER_TOKEN if callable(size) else 0


def requested_tenant(request: Any) -> str:
    """The tenant an open-mode request names (its `tenant`, its spec's, its first item's),
    cut to MOST_TENANT_CHARS; empty when it names none (a call on a job or run by id)."""
    tenant = getattr(request, "tenant", None)
    if not isinstance(tenant, str) or not tenant:
        spec = getattr(request, "spec", None)
        items = getattr(request, "items", None)
        if spec is None and items:
            spec = getattr(items[0], "spec", None)
        tenant = getattr(spec, "tenant", "") if spec is not None else ""
    return tenant[:MOST_TENANT_CHARS] if isinstance(tenant, str) else ""


def retry_after(seconds: float) -> int:
    """Whole seconds for the retry-after metadata: rounded up, at least one."""
    return max(1, math.ceil(seconds))


def is_heavy(method: str, request: Any) -> bool:
    """A call that counts among HEAVY_CALLS: a preview, a proof from the log, or a page of
    more than HEAVY_PAGE_ROWS rows."""
    if method in HEAVY:
        return True
    rows = HEAVY_PAGE_ROWS.get(method)
    return rows is not None and int(getattr(request, "page_size", 0)) > rows
