"""Write your own handlers for cronlog's workers (docs/handlers.md).

    from cronlog.sdk import Context, NonRetryable, handler

    @handler("backup")
    def backup(ctx: Context) -> dict[str, int]:
        target = ctx.json()["target"]
        ...
        return {"files": 12}

A worker loads them from the entry point group `cronlog.handlers` of the installed
packages, or from `CRONLOG_WORKER_HANDLERS=module[:attr],...`.
"""

from cronlog.sdk.context import Context
from cronlog.sdk.handlers import ENTRY_POINT_GROUP, NonRetryable, handler, handler_name
from cronlog.sdk.values import MAX_DETAILS_BYTES

__all__ = ["ENTRY_POINT_GROUP", "MAX_DETAILS_BYTES", "Context", "NonRetryable", "handler",
           "handler_name"]
