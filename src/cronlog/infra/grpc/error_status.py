"""The gRPC status of every error the application raises, in one place: each RPC and each
item of a batch is answered by it.

A domain or application error carries its status by name (DomainError.status, .field);
the adapters' own errors that mean "try again" are UNAVAILABLE; a page token this service
did not hand out is INVALID_ARGUMENT. Anything else is a bug: it is not answered here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NoReturn

import grpc

from cronlog.domain.errors import DomainError
from cronlog.infra.clickhouse.run_history import HistoryStoreError, InvalidRunPageToken
from cronlog.infra.kafka.command_channel import CommandNotAnswered, CommandNotSent
from cronlog.infra.postgres.connection import StateStoreError
from cronlog.infra.postgres.job_queries import InvalidPageToken
from cronlog.ports import LogUnavailable

log = logging.getLogger(__name__)

_TRY_AGAIN = (CommandNotAnswered, CommandNotSent, StateStoreError, HistoryStoreError,
              LogUnavailable)


@dataclass(frozen=True)
class ErrorStatus:
    code: grpc.StatusCode
    message: str
    field: str | None = None


def status_of(exc: BaseException) -> ErrorStatus | None:
    """The status an error is answered with; None for one that is not an answer (a bug)."""
    if isinstance(exc, DomainError):
        code = getattr(grpc.StatusCode, exc.status, None)
        if not isinstance(code, grpc.StatusCode):
            # An owner's reply naming a status this api does not know: still an answer.
            log.warning("unknown status name %r for %s", exc.status, type(exc).__name__)
            code = grpc.StatusCode.INTERNAL
        return ErrorStatus(code, str(exc), exc.field)
    if isinstance(exc, InvalidPageToken | InvalidRunPageToken):
        return ErrorStatus(grpc.StatusCode.INVALID_ARGUMENT, str(exc), "page_token")
    if isinstance(exc, _TRY_AGAIN):
        if isinstance(exc, StateStoreError | HistoryStoreError):
            log.warning("store unavailable: %s", exc)
        return ErrorStatus(grpc.StatusCode.UNAVAILABLE, str(exc))
    return None


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str,
          field: str | None = None) -> NoReturn:
    """Ends the RPC with the status; the field the error is about, if any, in the
    `cronlog-field` trailing metadata."""
    if field:
        context.set_trailing_metadata((("cronlog-field", field),))
    context.abort(code, message)
    raise AssertionError("unreachable")  # context.abort raises
