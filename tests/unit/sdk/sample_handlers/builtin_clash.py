"""A handler named like a built-in one: refused."""

from cronlog.sdk import Context, handler


@handler("echo")
def echo(ctx: Context) -> bytes:
    return b"mine"
