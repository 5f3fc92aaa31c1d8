"""How an owner cycle shares its inbox between tenants (issue 33, DESIGN invariant 12).

An owner decides its inbox partitions; many tenants' jobs share each partition. Decided
strictly in order, a tenant that sends costly commands (a CreateJobs of 1,000 schedules
that search for their fire times, say) fills every cycle with its own work up to the
inbox's share of the budget, and another tenant's CreateJob behind it waits for those
cycles, then for its own: 0.4-0.8 s for a command that takes 1 ms to decide.

So each tenant decides for at most TENANT_SHARE of a cycle's budget (commands/
cycle_budget.py), and at most TENANT_MESSAGES messages: what a cycle costs besides its
deciding (reading the commands' jobs and requests before, the transaction and the Postgres
apply of their events after) grows with the messages, cheap ones too (a cycle of 227 of a
tenant's creates and relays, decided in 177 ms, took 330 ms to the end of its apply). Its
messages past either are deferred: handed back to the transport like
those the budget left, decided first by the next cycle, where the tenant gets its share
again. A cycle in which one tenant is busy is short, and another tenant's command is
decided in the next cycle whatever the busy one has queued.

What keeps this exactly once:
- A deferred message stays undecided, and its partition's committed offset stays at it
  (OwnerTransport.put_back), so after a crash it is read and decided again, as any
  message past a committed offset is.
- Within a partition, a message behind a deferred one is deferred too (it would be decided
  before it), unless it is a command with a request id whose key no deferred message has:
  a command is decided by its request id once (commands/owner/request_ids.py), so deciding it
  again after a crash (its offset is behind the committed one) answers it the same way and
  writes nothing new. Reports and relays have no request id and never overtake; per key (a
  job's, a calendar's) the order is the inbox's. A worker report has no inbox key of its
  own (a WorkerReports message carries many): deferred, it holds back what is about its
  run's job, the key every command about that job has (`ordering_key`). It used to hold
  back the whole partition, so a report queued behind a busy tenant's deferred commands
  kept every other tenant's command of the partition waiting until the backlog was decided
  (another tenant's CreateJob 0.3-1.4 s behind the CreateJobs search bomb, where it is
  decided in the next cycle otherwise).
- Only commands and relays are deferred for their tenant's share. Worker reports are never
  charged: they are cheap, they carry several tenants' reports in one Kafka message (which
  must be decided whole), and their lateness would cost attempts (heartbeats).

Which tenant pays: the one a message names (a CreateJob's spec, a calendar's command, a
relay), else the owner of the job it names (a PauseJob names only its job). A message that
names none (malformed: it fails on its own) is charged to no one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cronlog.commands.owner.owner_cycle import Cycle
from cronlog.domain.catalogue import Command, Relay
from cronlog.domain.ids import as_uuid, valid_request_id
from cronlog.ports import InboundMessage

# Messages one tenant may have decided a cycle.
TENANT_MESSAGES = 50
COMMANDS = frozenset(Command)
SHARED = COMMANDS | frozenset(Relay)


def tenant_of(message: InboundMessage, cycle: Cycle) -> str | None:
    """The tenant whose share a message is decided on, or None (not charged)."""
    record: Mapping[str, Any] = message.record
    if message.name not in SHARED:
        return None
    named = named_tenant(message)
    if named is not None:
        return named
    if message.name in COMMANDS and record.get("job_id") is not None:
        try:
            job = cycle.job(as_uuid(record["job_id"]))
        except (TypeError, ValueError):
            return None  # the command fails on its own when it is decided
        return job.spec.tenant if job is not None else None
    return None


def named_tenant(message: InboundMessage) -> str | None:
    """The tenant a message names itself (a CreateJob's spec, a calendar's command, a
    relay), without loading anything; None for one that names only its job."""
    record: Mapping[str, Any] = message.record
    named = record.get("tenant")
    if isinstance(named, str) and named:
        return named
    spec = record.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("tenant"), str):
        return str(spec["tenant"])
    return None


def within_shares(messages: Sequence[InboundMessage],
                  most: int = TENANT_MESSAGES) -> list[InboundMessage]:
    """The messages a cycle may decide as far as their count goes: at most `most` of each
    tenant a message names, in order (those naming none all). What a cycle reads ahead
    for (its commands' jobs and requests) is bounded by what it can decide, not by a busy
    tenant's backlog handed to it again each cycle."""
    counts: dict[str, int] = {}
    chosen = []
    for message in messages:
        tenant = named_tenant(message)
        if tenant is not None:
            counts[tenant] = counts.get(tenant, 0) + 1
            if counts[tenant] > most:
                continue
        chosen.append(message)
    return chosen


def ordering_key(message: InboundMessage) -> str | None:
    """What a deferred message holds back later messages of its partition by: its inbox key
    (the job or calendar a command or relay is about), else the job a worker report is
    about. None for a message that names neither: every later message waits for it."""
    if message.key is not None:
        return message.key
    job_id = message.record.get("job_id")
    if job_id is None:
        return None
    try:
        return str(as_uuid(job_id))
    except (TypeError, ValueError):
        return None  # fails on its own when decided; until then nothing passes it


def overtakes(message: InboundMessage) -> bool:
    """Whether a message may be decided before a deferred one of its partition: a command
    decided by its request id once."""
    request_id = message.record.get("request_id")
    return (message.name in COMMANDS and request_id is not None
            and valid_request_id(request_id))


class InboxShares:
    """One round of deciding a cycle's messages: what each tenant has spent, and which
    messages are deferred (by their index in the cycle's messages)."""

    def __init__(self, share: float | None, monotonic: Callable[[], float],
                 messages: int = TENANT_MESSAGES) -> None:
        """share: the seconds one tenant may decide for; None: tenants are not shared
        (the cycle's budget alone bounds them)."""
        self._share = share
        self._messages = messages
        self._monotonic = monotonic
        self._spent: dict[str, float] = {}
        self._decided: dict[str, int] = {}
        # By partition: the keys of its deferred messages (None: a message without one,
        # which blocks every later message of the partition).
        self._blocked: dict[int, set[str | None]] = {}
        self.deferred: list[int] = []

    def holds_back(self, message: InboundMessage) -> bool:
        """Whether a message must wait behind a deferred one of its partition."""
        keys = self._blocked.get(message.partition)
        if keys is None:
            return False
        return None in keys or ordering_key(message) in keys or not overtakes(message)

    def over(self, tenant: str | None) -> bool:
        """Whether the tenant has spent its share of this cycle."""
        if tenant is None or self._share is None:
            return False
        return (self._spent.get(tenant, 0.0) >= self._share
                or self._decided.get(tenant, 0) >= self._messages)

    def defer(self, index: int, message: InboundMessage) -> None:
        self.deferred.append(index)
        self._blocked.setdefault(message.partition, set()).add(ordering_key(message))

    def charge(self, tenant: str | None, began: float) -> None:
        """The tenant's message took from `began` (monotonic seconds) until now."""
        if tenant is not None:
            self._spent[tenant] = self._spent.get(tenant, 0.0) + self._monotonic() - began
            self._decided[tenant] = self._decided.get(tenant, 0) + 1

