"""Another module naming a handler sample.greet: loading both is refused."""

from cronlog.sdk import Context, handler


@handler("sample.greet")
def greet_again(ctx: Context) -> bytes:
    return b"again"
