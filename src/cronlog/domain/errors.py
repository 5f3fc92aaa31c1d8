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
