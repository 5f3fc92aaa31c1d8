"""The built-in `command` handler: runs a program on the worker's host, if its operator
allows that program (docs/handlers.md).

No shell is involved unless argv names one. The outcome maps to the attempt's as
`error_type: message` (worker/execution.py), the error type being what a job's
`retry_policy.non_retryable_errors` names:

- exit status 0: success;
- exit status N: error type `exit status N`;
- ended by signal N: error type `signal N`;
- told to stop (timeout, cancel): `Cancelled` (the owner records the attempt's end itself);
- refused by the allow list: `CommandNotAllowed`, never retried;
- could not start (no such cwd, not permitted): `CommandNotStarted`.

The output is the JSON object of worker/command_output.py, for failures too.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

from cronlog.worker.command_output import render_output
from cronlog.worker.command_payload import parse_command_payload
from cronlog.worker.command_policy import NOT_ALLOWED, CommandNotAllowed, CommandPolicy
from cronlog.worker.command_process import Finished, run_in_group
from cronlog.worker.handler_context import HandlerContext, HandlerFailed

# What a command inherits of the worker's environment; nothing else of it (its secrets).
BASE_VARIABLES = ("PATH", "HOME", "LANG")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def run_variables(ctx: HandlerContext) -> dict[str, str]:
    """What a command learns of its attempt; the run id is the idempotency key."""
    return {"CRONLOG_RUN_ID": str(ctx.run_id), "CRONLOG_JOB_ID": str(ctx.job_id),
            "CRONLOG_ATTEMPT": str(ctx.attempt),
            "CRONLOG_SCHEDULED_AT": ctx.scheduled_at.isoformat()}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class CommandHandler:
    """Callable as a Handler; payload JSON {"argv", "env", "cwd", "stdin"}
    (worker/command_payload.py)."""

    def __init__(self, policy: CommandPolicy, worker_env: Mapping[str, str] | None = None
                 ) -> None:
        """worker_env: the worker's environment (os.environ when None), read once here: its
        PATH finds bare program names, and PATH, HOME and LANG are passed on."""
        env = os.environ if worker_env is None else worker_env
        self._policy = policy
        self._search_path = env.get("PATH", _DEFAULT_PATH)
        self._base = {name: env[name] for name in BASE_VARIABLES if name in env}
        if policy.run_as is not None:
            self._base["HOME"] = policy.run_as.home

    def __call__(self, ctx: HandlerContext) -> bytes:
        request = parse_command_payload(ctx.payload)
        program = request.argv[0]
        try:
            executable = self._policy.check(program, self._search_path)
        except CommandNotAllowed as exc:
            raise HandlerFailed(str(exc), NOT_ALLOWED) from None
        env = {**self._base, **request.env, **run_variables(ctx)}
        try:
            finished = run_in_group(request.argv, executable, env, request.cwd, request.stdin,
                                    self._policy.run_as, self._policy.grace_seconds,
                                    ctx.cancelled)
        except OSError as exc:
            raise HandlerFailed(f"{program} could not start: {exc.strerror or exc}",
                                "CommandNotStarted") from None
        return self._outcome(program, finished)

    def _outcome(self, program: str, finished: Finished) -> bytes:
        code = finished.returncode
        status = code if code is not None and code >= 0 else None
        number = -code if code is not None and code < 0 else None
        output = render_output(finished.stdout, finished.stderr, status, number)
        if finished.stopped:
            raise HandlerFailed(f"told to stop: {program}'s process group was ended "
                                f"(SIGTERM, SIGKILL after {self._policy.grace_seconds:g} s)",
                                "Cancelled", output)
        if code == 0:
            return output
        if code is None:
            raise HandlerFailed(f"{program} did not end after SIGKILL", "CommandNotStopped",
                                output)
        if number is not None:
            raise HandlerFailed(f"{program} was ended by {_signal_name(number)}",
                                f"signal {number}", output)
        raise HandlerFailed(f"{program} failed", f"exit status {code}", output)
