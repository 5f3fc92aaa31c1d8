"""Errors the domain raises; adapters translate them into protocol status codes."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the scheduling model raises on purpose.

    `status` is the gRPC status name it is answered with (a name, so that the domain knows
    no gRPC type), `field` the request field it is about, when there is one: the api and the
    owner's replies map every error by these, in one place each (infra/grpc/error_status.py,
    commands/request_ids.Outcome.refused)."""

    status: str = "FAILED_PRECONDITION"
    field: str | None = None


class InvalidSpec(DomainError):
    """A job spec (or a schedule preview request) is not acceptable; names the bad field."""

    status = "INVALID_ARGUMENT"
    field: str

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ScheduleTooCostly(InvalidSpec):
    """A schedule whose next fire time the search could not find within its bound of steps
    (domain/schedule_search.py, invariant 12), or could not find at all within its horizon
    from some instant: refused at the door (INVALID_ARGUMENT naming the field and the
    bound); a job whose search hits the bound at its owner is set aside (invariant 9)."""


class ClockReadForbidden(DomainError):
    """The domain tried to read the wall clock; time must be passed in."""


class JobNotFound(DomainError):
    status = "NOT_FOUND"


class RunNotFound(DomainError):
    status = "NOT_FOUND"


class SpecNotKept(DomainError):
    """RestoreJob asked for a version whose spec the job's spec history does not hold (a
    spec replaced before the history was kept: `cronlog replay --rebuild` fills it)."""

    field = "version"


class StaleVersion(DomainError):
    """A change was asked for against a job version that is no longer current."""


class JobNotActive(DomainError):
    """The job cannot fire or be changed in its current status."""


class DependentsRemain(DomainError):
    """A job other jobs run after cannot be deleted while they name it."""
