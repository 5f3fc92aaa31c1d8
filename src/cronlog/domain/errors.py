"""Errors the domain raises; adapters translate them into protocol status codes."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the scheduling model raises on purpose."""


class InvalidSpec(DomainError):
    """A job spec (or a schedule preview request) is not acceptable; names the bad field."""

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
    pass


class RunNotFound(DomainError):
    pass


class StaleVersion(DomainError):
    """A change was asked for against a job version that is no longer current."""


class JobNotActive(DomainError):
    """The job cannot fire or be changed in its current status."""


class DependentsRemain(DomainError):
    """A job other jobs run after cannot be deleted while they name it."""
