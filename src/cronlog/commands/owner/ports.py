"""What the partition owner talks to, the shapes it exchanges with them, and the failures
its adapters report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol
from uuid import UUID

from cronlog.domain.calendar import Calendar
from cronlog.domain.channel import Channel
from cronlog.domain.exclusions import AppliedCalendar
from cronlog.domain.fan_in import FanIn
from cronlog.domain.job import Job
from cronlog.domain.run import Run
from cronlog.ports import InboundMessage, Record


class TransactionRejected(RuntimeError):
    """The owner's Kafka transaction did not commit (or its outcome is unknown).

    fenced: this process is no longer the owner of its partitions (KIP-447 generation fencing,
    or another producer took its transactional id).
    """

    fenced: bool = False


class EpochLost(RuntimeError):
    """A newer owner took the partition's epoch: this owner's writes are refused."""

class OwnerReplaced(RuntimeError):
    """Another scheduler process took this one's identity; this process must stop."""


class Outgoing(NamedTuple):
    """One record a cycle writes. A named tuple, as InboundMessage: several per run."""

    topic: str
    key: str
    name: str
    record: Record


# What the owner wrote, once committed, has the same shape as what it reads.
Produced = InboundMessage


@dataclass(frozen=True)
class PartitionEvents:
    """A partition's events committed in one cycle, in offset order, and the epoch under
    which this owner holds the partition."""

    partition: int
    epoch: int
    job_events: Sequence[Produced]
    run_events: Sequence[Produced]


@dataclass(frozen=True)
class Claim:
    partition: int
    epoch: int
    job_events_offset: int
    run_events_offset: int
    # Who held the partition before this claim (its instance id), if anyone did.
    previous_owner: str | None = None


class DepartedOwnerFence(Protocol):
    def fence_departed(self, owners: Collection[str]) -> list[str]:
        """Ends whatever Kafka transaction these earlier owners of partitions just taken
        left open, for those no longer in the schedulers' group (killed, cut off): their
        open transaction would hold back every reader of the partitions it wrote to until
        the coordinator aborts it. Returns those fenced; a live one is never fenced."""


class OwnerTransport(Protocol):
    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def transact(self, outgoing: Sequence[Outgoing]) -> Sequence[Produced]: ...

    def rewind(self) -> None: ...

    @property
    def assigned(self) -> frozenset[int]: ...

    def hold(self, partitions: Sequence[int]) -> None:
        """Keeps the inbox messages of these partitions back (their offsets uncommitted)
        until release: their owner has not caught up yet."""

    def release(self, partitions: Sequence[int]) -> None: ...

    def put_back(self, messages: Sequence[InboundMessage]) -> None:
        """Messages of the last poll, in the order polled, that the cycle did not decide
        (its budget was spent; whole Kafka messages, the last ones of each partition it
        polled): the next poll hands them out first, each partition in order, and until
        then the transactions commit each partition's position at its first of them."""

    @property
    def group_member(self) -> str:
        """Who the group gave this owner's partitions to, as the group names it: the api
        compares it with caught_up's record to tell an owner that caught up."""


@dataclass(frozen=True)
class DueWindow:
    """The jobs an owner fires now: every job whose next fire time is at or before `until`,
    and those whose runs are at least `sparse_gap` apart (Job.runs_apart) whose next fire
    time is at or before `sparse_until`."""

    until: datetime
    sparse_until: datetime
    sparse_gap: timedelta

    @classmethod
    def plain(cls, until: datetime) -> DueWindow:
        """Every job due by `until`, none earlier for being sparse."""
        return cls(until, until, timedelta(0))


@dataclass(frozen=True)
class StoredRequest:
    """A request id already applied to a job, as the log recorded it (JobRequestApplied)."""

    # None for ids taken before commands and digests were recorded (older logs).
    command: str | None
    digest: str | None
    job_version: int


class OwnerStore(Protocol):
    def take_epochs(self, partitions: Sequence[int], owner: str) -> list[Claim]: ...

    def due_jobs(self, partitions: Iterable[int], window: DueWindow, limit: int,
                 excluded_tenants: Sequence[str] = ()) -> list[Job]: ...

    def job(self, job_id: UUID) -> Job | None: ...

    def run(self, run_id: UUID) -> Run | None: ...

    def load_runs(self, run_ids: Sequence[UUID]) -> list[Run]: ...

    def load_jobs(self, job_ids: Sequence[UUID]) -> list[Job]: ...

    def in_flight_runs(self, partitions: Sequence[int]) -> list[tuple[int, Run]]:
        """Scheduled and running runs of these partitions, each with its partition."""

    def caught_up(self, claims: Sequence[Claim], group_member: str) -> None:
        """Records that the owner holding these claims has caught up with the log."""

    def unfinished_runs(self, job_id: UUID) -> list[Run]: ...

    def request(self, job_id: UUID, request_id: str) -> StoredRequest | None: ...

    def requests(self, keys: Sequence[tuple[UUID, str]]
                 ) -> dict[tuple[UUID, str], StoredRequest]:
        """Those of the (job, request id) pairs that are taken, in one read."""

    def apply(self, batches: Sequence[PartitionEvents]) -> None:
        """Applies a cycle's committed events of every partition in one state transaction,
        fenced by each partition's epoch: all or, when one epoch is no longer current
        (EpochLost), none; the next owner's catch-up applies them from the log."""

    def fan_in(self, job: Job) -> FanIn:
        """A dependent job's fan-in as the log left it (domain/fan_in.py)."""

    def waiting_fan_ins(self, partitions: Sequence[int]) -> list[tuple[int, UUID, datetime]]:
        """Dependent jobs of these partitions with logical times waiting: (partition, job,
        when the earliest began to wait)."""

    def jobs_with_dependents(self, partitions: Sequence[int]) -> list[tuple[int, UUID]]:
        """Jobs of these partitions that other jobs run after: (partition, job)."""

    def calendar(self, calendar_id: UUID) -> Calendar | None:
        """A calendar with the jobs that follow it, as the log left it (issue 20)."""

    def channel(self, channel_id: UUID) -> Channel | None:
        """An alert channel as its events left it, deleted or not (issue 37)."""

    def published_calendar(self, calendar_id: UUID) -> AppliedCalendar | None:
        """A calendar's version and days as its owner last applied them (the `calendars`
        projection), without its followers: what a follower applies by reference."""

    def calendar_versions(self, calendar_ids: Sequence[UUID]) -> dict[UUID, int]:
        """The versions of those of the calendars that exist, as the projection has them
        (one read, no days)."""

    def following_jobs(self, job_ids: Sequence[UUID], partitions: Sequence[int]) -> list[Job]:
        """Those of the jobs that are in these partitions (one read)."""

    def stale_followers(self, partitions: Sequence[int], within: timedelta | None = None
                        ) -> list[tuple[UUID, UUID, int]]:
        """Jobs of these partitions that follow a calendar whose row is of a newer version
        than the one they applied: (job, calendar, the row's version). With `within`, only
        those of calendars applied that recently (by the database's clock)."""


class CatchUp(Protocol):
    """Applies the committed events of claimed partitions to the state, a while at a time."""

    def advance(self, seconds: float) -> list[Claim]:
        """Goes on for about `seconds` at most; returns the claims whose partitions are
        caught up now (each once, after all their events were applied)."""

    @property
    def finished(self) -> bool: ...

    def close(self) -> None: ...


class LogReplay(Protocol):
    def start(self, claims: Sequence[Claim]) -> CatchUp: ...


class EventRecords(Protocol):
    def to_record(self, event: object) -> tuple[str, dict[str, Any]]: ...

    def spec_from_record(self, record: Mapping[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Topics:
    job_events: str
    run_events: str
    replies: str
    dispatch: Callable[[str], str]
    dead_letters: str = "dead-letters"
    alerts: str = "alerts"
    poison: str = "poison"
    # Owners tell one another through the inbox, keyed by the receiving job (issue 16).
    inbox: str = "inbox"


@dataclass
class Deadline:
    """When the owner gives up on a running attempt; kept in memory, never in Postgres."""

    partition: int
    attempt: int
    heartbeat_timeout: timedelta
    heartbeat_due: datetime
    timeout_due: datetime
    # The latest progress a handler's heartbeat gave (details, worker, when) and not yet
    # recorded; the details last recorded, and when (attempt_tracking.PROGRESS_EVERY).
    progress: tuple[bytes, str, datetime] | None = None
    recorded_progress: bytes | None = None
    progress_recorded_at: datetime | None = None


@dataclass(slots=True)
class CycleTally:
    """What one committed cycle wrote, counted once from what it committed (an aborted
    cycle counts nothing): commands/owner/cycle_tally.py."""

    # Job and run events.
    events: int = 0
    # Runs by (what happened, queue): created, missed, skipped, dead_lettered, and the
    # final statuses succeeded, failed, cancelled.
    runs: Counter[tuple[str, str]] = field(default_factory=Counter)
    # Seconds left before their start when the cycle committed, of the runs fired by their
    # schedule and dispatched at once, by queue.
    leads: dict[str, list[float]] = field(default_factory=dict)
    # Inbox messages set aside to the poison topic.
    set_aside: int = 0
    # Commands refused, by the status told to the caller.
    refused: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class CycleFigures:
    """One owner cycle as CycleTimes measured it: what operators are told (OwnerMetrics)
    and what the owner's periodic log line sums."""

    # From the poll's return to the events applied.
    seconds: float
    # Committing the cycle's transaction; None when the cycle had nothing to commit.
    commit_seconds: float | None
    # Inbox messages the cycle handled.
    messages: int
    # The lookahead the cycle fired with (widened while cycles are slow).
    lookahead_seconds: float
    tally: CycleTally
    # Whether the cycle stopped taking work for its budget (commands/owner/cycle_budget.py), and
    # how many polled inbox messages it left to the next cycle.
    over_budget: bool = False
    carried: int = 0
    # Polled messages left to the next cycle because their tenant had spent its share of
    # this one (commands/owner/inbox_shares.py), or waited behind such a message.
    deferred: int = 0


class OwnerMetrics(Protocol):
    """What a partition owner tells operators; infra/observability exports it as the
    cronlog_scheduler_* metrics. Called on the owner's loop once a cycle or a takeover, never
    per run: cheap, no I/O."""

    def cycle(self, figures: CycleFigures) -> None: ...

    def partitions_claimed(self, count: int) -> None:
        """New epochs taken for `count` partitions (a takeover, or a re-take after a resync)."""

    def caught_up(self, partitions: int, seconds: float) -> None:
        """`partitions` claimed partitions caught up with their log, `seconds` after they
        were claimed."""


class NoOwnerMetrics:
    """An owner nobody watches (tests, tools)."""

    def cycle(self, figures: CycleFigures) -> None:
        pass

    def partitions_claimed(self, count: int) -> None:
        pass

    def caught_up(self, partitions: int, seconds: float) -> None:
        pass
