"""The one error a cronlog client raises for a refused or failed call: the gRPC status, the
api's reason, and the request field the api named (trailing metadata `cronlog-field`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import grpc

# The trailing metadata key the api names a refused request's field under
# (infra/grpc/error_status.py).
FIELD_METADATA_KEY = "cronlog-field"


class ApiError(Exception):
    """A call the api refused (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, ...) or
    could not be made (UNAVAILABLE, DEADLINE_EXCEEDED). `message` is the api's reason ("" when
    it gave none); `field` the request field it named, several joined by ", " ("" for none)."""

    def __init__(self, code: grpc.StatusCode, message: str = "", field: str = "") -> None:
        super().__init__(f"{code.name}: {message or 'no details'}")
        self.code = code
        self.message = message
        self.field = field

    @property
    def code_name(self) -> str:
        return str(self.code.name)

    def describe(self) -> str:
        """One printable line: the status, the reason, and the field named."""
        text = f"{self.code_name}: {self.message or 'no details'}"
        if self.field:
            text += f" (field: {self.field})"
        return "".join(ch if ch.isprintable() else "?" for ch in text)


def api_error(exc: grpc.RpcError) -> ApiError:
    """The ApiError of a failed call. A stub raises errors that are also grpc.Call objects
    (code, details, trailing metadata); whatever of those another error lacks counts as
    absent."""
    code = getattr(exc, "code", lambda: grpc.StatusCode.UNKNOWN)()
    details = getattr(exc, "details", lambda: None)() or ""
    # grpc-stubs declares objects with .key; grpcio hands out (key, value) pairs.
    trailing = cast("Iterable[tuple[str, str | bytes]]",
                    getattr(exc, "trailing_metadata", lambda: None)() or ())
    fields = [value.decode(errors="replace") if isinstance(value, bytes) else value
              for key, value in trailing if key == FIELD_METADATA_KEY]
    return ApiError(code, str(details), ", ".join(fields))
