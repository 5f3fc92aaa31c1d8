"""The commands an api sends an owner: one frozen dataclass each (issue 35, item 1).

A command's shape lived in many places: its Avro schema, the dict the api built, the
fields its request id is judged by (request_ids), whether its owner reads its job ahead
(job_commands.ON_JOBS), and its handler. Each class here says, once, what its command
carries (its fields are its newest schema's), which of them say what it does
(MEANINGFUL: the request digest's fields; not `at`, not the correlation id, not the key)
and whether it is keyed by a job (a JobCommand). The tables the owner reads are derived
from these classes, and tests/unit/commands/test_command_messages.py fails for a command
without a class, a schema whose fields differ from the class's, a stored sample or an
owner's handler.

The api builds these objects and its bus sends them (the channel encodes the record the
class gives); the owner turns each decoded command record into its class (`from_record`)
and hands it to the handler of that class (`typed`): one that does not fit its class fails
alone (docs/architecture.md, "A command").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar, Protocol, Self, TypeVar
from uuid import UUID

from cronlog.domain.catalogue import Command
from cronlog.domain.channel import channel_id
from cronlog.domain.exclusions import calendar_id
from cronlog.domain.ids import as_uuid


class CommandBus(Protocol):
    def send(self, command: CommandMessage, timeout: float) -> Mapping[str, Any]:
        """Sends a command to its owner; the owner's CommandReply record."""


@dataclass(frozen=True, kw_only=True)
class CommandMessage:
    """What every command carries: the client's request id, when the api sent it, and the
    correlation id its reply is routed by (commands/reply_routes.py)."""

    NAME: ClassVar[Command]
    # The fields that say what the command does: a retry repeats them, a reuse of the
    # request id with others is refused (commands/owner/request_ids.py).
    MEANINGFUL: ClassVar[tuple[str, ...]] = ()

    request_id: str
    at: datetime
    correlation_id: str | None = None

    @property
    def subject(self) -> UUID:
        """The id of what it is about (a job's, a calendar's): its request id is taken there."""
        raise NotImplementedError

    @property
    def key(self) -> str:
        """The inbox key: which partition's owner decides it."""
        return str(self.subject)

    def record(self) -> dict[str, Any]:
        """The command as its Avro schema's record."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Self:
        """The command a decoded record carries. Raises KeyError, ValueError or TypeError
        for a record that is not one (anyone may write to the inbox: it fails alone)."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = record.get(f.name)
            if value is None:
                if f.default is MISSING and f.default_factory is MISSING:
                    raise KeyError(f"{cls.NAME} without {f.name}")
                continue
            values[f.name] = _typed(f.name, value)
        return cls(**values)

    def meaningful(self) -> dict[str, Any]:
        """The fields its request id is judged by (commands/owner/request_ids.py)."""
        return {name: getattr(self, name) for name in self.MEANINGFUL}


@dataclass(frozen=True, kw_only=True)
class JobCommand(CommandMessage):
    """A command on one job, keyed by its id: an owner reads the jobs and stored requests of
    a cycle's job commands at once (Cycle.prefetch_commands)."""

    job_id: UUID

    @property
    def subject(self) -> UUID:
        return self.job_id


@dataclass(frozen=True, kw_only=True)
class CalendarCommand(CommandMessage):
    """A command on one of a tenant's calendars, keyed by the calendar's id (derived from
    its tenant and name, issue 20)."""

    tenant: str
    name: str
    description: str = ""
    exclusions: tuple[dict[str, Any], ...] = field(default=())

    @property
    def subject(self) -> UUID:
        return calendar_id(self.tenant, self.name)


@dataclass(frozen=True, kw_only=True)
class JobSpecCommand(JobCommand):
    """A command that gives a job its spec (a create or an update)."""

    spec: dict[str, Any]
    # The job's calendar as the api read it (issue 20): its version and excluded days.
    calendar_version: int = 0
    calendar_exclusions: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class CreateJob(JobSpecCommand):
    NAME = Command.CREATE_JOB
    MEANINGFUL = ("spec",)


@dataclass(frozen=True, kw_only=True)
class UpdateJob(JobSpecCommand):
    NAME = Command.UPDATE_JOB
    MEANINGFUL = ("expected_version", "spec")
    expected_version: int


@dataclass(frozen=True, kw_only=True)
class RestoreJob(JobSpecCommand):
    """Gives a job the spec it had at `restored_version` (the api read it from the job's
    spec history: the owner trusts it, as it trusts an update's), bringing it back if
    deleted or completed; `skip_missed`: the fire times since it stopped are not run."""

    NAME = Command.RESTORE_JOB
    MEANINGFUL = ("restored_version", "skip_missed")
    restored_version: int
    skip_missed: bool = False


@dataclass(frozen=True, kw_only=True)
class PauseJob(JobCommand):
    NAME = Command.PAUSE_JOB


@dataclass(frozen=True, kw_only=True)
class ResumeJob(JobCommand):
    NAME = Command.RESUME_JOB


@dataclass(frozen=True, kw_only=True)
class DeleteJob(JobCommand):
    NAME = Command.DELETE_JOB


@dataclass(frozen=True, kw_only=True)
class TriggerJob(JobCommand):
    NAME = Command.TRIGGER_JOB
    # Whether the manual run's dependents follow it (issue 16).
    cascade: bool = False


@dataclass(frozen=True, kw_only=True)
class BackfillJob(JobCommand):
    NAME = Command.BACKFILL_JOB
    MEANINGFUL = ("after", "until")
    after: datetime
    until: datetime
    cascade: bool = False


@dataclass(frozen=True, kw_only=True)
class CancelRun(JobCommand):
    NAME = Command.CANCEL_RUN
    MEANINGFUL = ("run_id",)
    run_id: UUID


@dataclass(frozen=True, kw_only=True)
class RedriveRun(JobCommand):
    NAME = Command.REDRIVE_RUN
    MEANINGFUL = ("run_id",)
    run_id: UUID
    # Who asked, as the api knows the caller: recorded on RunRedriven for the audit.
    requested_by: str = ""


@dataclass(frozen=True, kw_only=True)
class CreateCalendar(CalendarCommand):
    NAME = Command.CREATE_CALENDAR
    MEANINGFUL = ("tenant", "name", "description", "exclusions")


@dataclass(frozen=True, kw_only=True)
class UpdateCalendar(CalendarCommand):
    NAME = Command.UPDATE_CALENDAR
    MEANINGFUL = ("tenant", "name", "description", "exclusions", "expected_version")
    # -1: whatever the calendar's version.
    expected_version: int = -1


@dataclass(frozen=True, kw_only=True)
class ChannelCommand(CommandMessage):
    """A command on one of a tenant's alert channels, keyed by the channel's id (derived
    from its tenant and name in the channels' namespace, issue 37)."""

    tenant: str
    name: str

    @property
    def subject(self) -> UUID:
        return channel_id(self.tenant, self.name)


@dataclass(frozen=True, kw_only=True)
class ChannelSettings(ChannelCommand):
    """Where a channel delivers, as a create or an update gives it."""

    target: str = ""
    recipients: tuple[str, ...] = ()
    description: str = ""
    is_default: bool = False


@dataclass(frozen=True, kw_only=True)
class CreateChannel(ChannelSettings):
    NAME = Command.CREATE_CHANNEL
    MEANINGFUL = ("tenant", "name", "kind", "target", "recipients", "description",
                  "is_default")
    kind: str


@dataclass(frozen=True, kw_only=True)
class UpdateChannel(ChannelSettings):
    NAME = Command.UPDATE_CHANNEL
    MEANINGFUL = ("tenant", "name", "target", "recipients", "description", "is_default",
                  "expected_version")
    # -1: whatever the channel's version.
    expected_version: int = -1


@dataclass(frozen=True, kw_only=True)
class DeleteChannel(ChannelCommand):
    NAME = Command.DELETE_CHANNEL
    MEANINGFUL = ("tenant", "name")


@dataclass(frozen=True, kw_only=True)
class RotateChannelSecret(ChannelCommand):
    NAME = Command.ROTATE_CHANNEL_SECRET
    MEANINGFUL = ("tenant", "name")


COMMAND_TYPES: tuple[type[CommandMessage], ...] = (
    CreateJob, UpdateJob, PauseJob, ResumeJob, DeleteJob, TriggerJob, BackfillJob, CancelRun,
    RedriveRun, RestoreJob, CreateCalendar, UpdateCalendar, CreateChannel, UpdateChannel,
    DeleteChannel, RotateChannelSecret)
BY_NAME: dict[str, type[CommandMessage]] = {kind.NAME: kind for kind in COMMAND_TYPES}

# What the owner reads from the classes: the fields each command's request id is judged by,
# and the commands keyed by a job.
MEANINGFUL_FIELDS: dict[str, tuple[str, ...]] = {kind.NAME: kind.MEANINGFUL
                                                 for kind in COMMAND_TYPES}
ON_JOBS: frozenset[str] = frozenset(kind.NAME for kind in COMMAND_TYPES
                                    if issubclass(kind, JobCommand))


def field_names(kind: type[CommandMessage]) -> list[str]:
    """The command's fields, as its schema names them."""
    return [f.name for f in fields(kind)]


C = TypeVar("C", bound=CommandMessage)
Handler = Callable[[Mapping[str, Any], datetime, Any], None]


def typed(kind: type[C], handler: Callable[[C, datetime, Any], None]) -> Handler:
    """The owner's handler of a command record: the record as its class, to `handler`."""
    def handle(record: Mapping[str, Any], now: datetime, cycle: Any) -> None:
        handler(kind.from_record(record), now, cycle)
    return handle


def _typed(name: str, value: Any) -> Any:
    if name in ("job_id", "run_id"):
        return as_uuid(value)
    if name == "request_id":
        return str(value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _plain(value: Any) -> Any:
    # The codec takes uuids as text and arrays as lists.
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value
