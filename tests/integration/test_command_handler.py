"""The `command` handler running real processes: output and environment, exit statuses,
refusals, and its process group gone after every way the attempt ends."""

from __future__ import annotations

import json
import os
import pwd
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import cast
from uuid import uuid4

import pytest

from cronlog.domain.run_states import error_type_of
from cronlog.worker.attempt_stop import raise_in_thread
from cronlog.worker.command_handler import CommandHandler
from cronlog.worker.command_output import TAIL_BYTES
from cronlog.worker.command_policy import CommandPolicy, RunAs
from cronlog.worker.command_process import group_alive
from cronlog.worker.execution import MAX_OUTPUT_BYTES, invoke
from cronlog.worker.handler_context import HandlerContext, HandlerFailed
from cronlog.worker.handlers import HandlerRegistry
from tests.support.polling import wait_for

pytestmark = pytest.mark.integration

ALLOW = ("/usr/bin/*", "/bin/*")
WORKER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
              "CRONLOG_POSTGRES_DSN": "postgresql://secret@db/cronlog"}
SCHEDULED = datetime(2026, 12, 6, 2, 0, tzinfo=UTC)
# How long a forced stop is given before the next; the worker's is its cancel grace.
STOP_GRACE_SECONDS = 5.0


def context(payload: dict[str, object], attempt: int = 1) -> HandlerContext:
    return HandlerContext(uuid4(), uuid4(), attempt, "key", json.dumps(payload).encode(),
                          SCHEDULED, 30.0)


def handler(grace: float = 1.0, allow: tuple[str, ...] = ALLOW,
            run_as: RunAs | None = None) -> CommandHandler:
    return CommandHandler(CommandPolicy(allow, run_as, grace), WORKER_ENV)


def output_of(failure: HandlerFailed) -> dict[str, object]:
    return dict(json.loads(failure.output))


def gone(pid: int, group: bool = True) -> bool:
    """Nothing of the group (or the process) runs: a killed member may stay a zombie a
    while, until its new parent (the container's first process) reaps it."""
    if group:
        return not group_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def read_pid(path: Path) -> int:
    # wait_for hands back only a truthy answer: the text, never the False of a missing file.
    return int(cast(str, wait_for(lambda: path.exists() and path.read_text().strip(), 10,
                                  f"{path.name} written")))


class InThread:
    """A handler call on a thread of its own, as the worker makes it."""

    def __init__(self, run: CommandHandler, ctx: HandlerContext) -> None:
        self.ctx = ctx
        self.result: bytes | BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self.thread.start()

    def _run(self, run: CommandHandler) -> None:
        try:
            self.result = run(self.ctx)
        except BaseException as exc:  # the test looks at what ended it
            self.result = exc

    def join(self, timeout: float) -> bytes | BaseException | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the handler still runs after {timeout} s"
        return self.result


def test_a_command_succeeds_with_its_output_input_and_the_runs_variables() -> None:
    ctx = context({"argv": ["sh", "-c", 'echo "$CRONLOG_RUN_ID $CRONLOG_JOB_ID '
                                        '$CRONLOG_ATTEMPT $CRONLOG_SCHEDULED_AT $MINE"; '
                                        'echo "dsn=${CRONLOG_POSTGRES_DSN:-none}"; '
                                        'echo warning >&2; cat'],
                   "env": {"MINE": "mine"}, "stdin": "fed"}, attempt=2)
    fields = json.loads(handler()(ctx))
    assert fields == {
        "exit_status": 0, "signal": None,
        "stdout": f"{ctx.run_id} {ctx.job_id} 2 2026-12-06T02:00:00+00:00 mine\n"
                  "dsn=none\nfed",
        "stderr": "warning\n", "stdout_truncated": False, "stderr_truncated": False}


def test_the_environment_is_the_minimal_base_the_payloads_and_the_runs(tmp_path: Path) -> None:
    ctx = context({"argv": ["/usr/bin/env"], "env": {"PATH": "/opt/x:/usr/bin"},
                   "cwd": str(tmp_path)})
    lines = json.loads(handler()(ctx))["stdout"].splitlines()
    names = {line.partition("=")[0] for line in lines}
    assert names == {"PATH", "HOME", "LANG", "CRONLOG_RUN_ID", "CRONLOG_JOB_ID",
                     "CRONLOG_ATTEMPT", "CRONLOG_SCHEDULED_AT"}
    assert "PATH=/opt/x:/usr/bin" in lines


def test_no_shell_is_involved_unless_argv_names_one() -> None:
    ctx = context({"argv": ["echo", "$HOME; touch /tmp/never", "*"]})
    assert json.loads(handler()(ctx))["stdout"] == "$HOME; touch /tmp/never *\n"


def test_a_nonzero_exit_status_is_the_error_type_with_the_output() -> None:
    ctx = context({"argv": ["sh", "-c", "echo partial; echo broken >&2; exit 3"]})
    with pytest.raises(HandlerFailed) as failure:
        handler()(ctx)
    assert failure.value.error_type == "exit status 3"
    assert output_of(failure.value)["stdout"] == "partial\n"
    assert output_of(failure.value)["exit_status"] == 3
    # As the worker reports it, and as a job's non_retryable_errors names it.
    registry = HandlerRegistry(commands=CommandPolicy(ALLOW))
    outcome, output, error = invoke(registry, {"handler": "command"}, ctx)
    assert (outcome, error) == ("failed", "exit status 3: sh failed")
    assert error is not None
    assert error_type_of(error) == "exit status 3"
    assert json.loads(output)["stderr"] == "broken\n"


def test_a_process_ended_by_a_signal_fails_naming_it() -> None:
    with pytest.raises(HandlerFailed) as failure:
        handler()(context({"argv": ["sh", "-c", "kill -KILL $$"]}))
    assert failure.value.error_type == "signal 9"
    assert "SIGKILL" in str(failure.value)
    assert output_of(failure.value)["signal"] == 9


def test_a_program_not_allowed_is_refused_and_never_started(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ctx = context({"argv": ["/usr/bin/touch", str(marker)]})
    with pytest.raises(HandlerFailed) as failure:
        handler(allow=("/usr/bin/echo",))(ctx)
    assert failure.value.error_type == "CommandNotAllowed"
    assert str(failure.value) == ("/usr/bin/touch is not allowed on this worker; operators "
                                  "allow executables with CRONLOG_COMMAND_ALLOW")
    # The worker's default: nothing allowed at all.
    with pytest.raises(HandlerFailed, match="this worker allows no commands"):
        HandlerRegistry().get("command")(ctx)
    assert not marker.exists()


def test_a_missing_working_directory_fails_the_start(tmp_path: Path) -> None:
    with pytest.raises(HandlerFailed) as failure:
        handler()(context({"argv": ["pwd"], "cwd": str(tmp_path / "missing")}))
    assert failure.value.error_type == "CommandNotStarted"
    assert json.loads(handler()(context({"argv": ["pwd"], "cwd": str(tmp_path)})))[
        "stdout"] == f"{tmp_path}\n"


def supervising(thread: threading.Thread) -> bool:
    """Whether the thread's handler watches its group (worker/command_process.py), past
    starting it: the leader may write its pid before the starting thread, on a starved
    machine, has returned from Popen, where no forced stop can know the group."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "_supervise":
            return True
        frame = frame.f_back
    return False


def stubborn_group(tmp_path: Path, grace: float) -> tuple[InThread, int]:
    """A running command whose whole group ignores SIGTERM, its handler watching it, and its
    group id."""
    leader = tmp_path / "leader"
    ctx = context({"argv": ["sh", "-c", f'echo $$ > {leader}; trap "" TERM; '
                                        "sleep 600 & sleep 600"]})
    call = InThread(handler(grace=grace), ctx)
    pgid = read_pid(leader)
    assert not gone(pgid)
    wait_for(lambda: supervising(call.thread), 10, "the handler watching its group")
    return call, pgid


def test_a_cancel_ends_a_group_that_ignores_sigterm(tmp_path: Path) -> None:
    call, pgid = stubborn_group(tmp_path, grace=1.0)
    began = time.monotonic()
    call.ctx.cancelled.set()
    result = call.join(15)
    assert isinstance(result, HandlerFailed) and result.error_type == "Cancelled"
    assert time.monotonic() - began >= 1.0  # SIGTERM was ignored: SIGKILL after the grace
    wait_for(lambda: gone(pgid), 10, "no process of the group left")


def test_a_forced_stop_kills_the_group_at_once(tmp_path: Path) -> None:
    call, pgid = stubborn_group(tmp_path, grace=600.0)
    ident = call.thread.ident
    assert ident is not None

    raised_at: list[float] = []

    def stopped() -> bool:
        # As the worker does (worker/running_attempts.py): again, a grace later, while the
        # thread still runs. An asynchronous exception that lands in a weakref callback or a
        # finalizer the thread happens to run is printed and dropped by the interpreter.
        # Sooner than a grace, on a loaded machine, the next one could land in InThread's
        # own `except` and end the thread before it kept what stopped the handler.
        if not call.thread.is_alive():
            return True
        if not raised_at or time.monotonic() - raised_at[-1] >= STOP_GRACE_SECONDS:
            raise_in_thread(ident)
            raised_at.append(time.monotonic())
        return False

    wait_for(stopped, 30, "the handler's thread stopped by force", interval=0.2)
    result = call.join(1)
    assert type(result).__name__ == "AttemptStopped"
    wait_for(lambda: gone(pgid), 10, "no process of the group left")


@pytest.mark.parametrize("ignores_term", [False, True])
def test_a_child_left_running_after_a_normal_exit_is_ended(tmp_path: Path,
                                                           ignores_term: bool) -> None:
    child = tmp_path / "child"
    trap = 'trap "" TERM; ' if ignores_term else ""
    ctx = context({"argv": ["sh", "-c", f"{trap}sleep 600 >/dev/null 2>&1 & "
                                        f"echo $! > {child}; echo started"]})
    # SIGTERM ends the child at once; one that ignores it is killed after the grace. A grace
    # far longer than any starved step tells "at once" apart without timing it tightly (a
    # bound of 1 s failed once under make test's SCHED_IDLE stage).
    grace = 1.0 if ignores_term else 60.0
    began = time.monotonic()
    fields = json.loads(handler(grace=grace)(ctx))
    assert fields["exit_status"] == 0 and fields["stdout"] == "started\n"
    took = time.monotonic() - began
    assert (took >= grace) if ignores_term else (took < grace)
    wait_for(lambda: gone(read_pid(child), group=False), 10, "the background child gone")


def test_output_beyond_64_kib_keeps_its_tail_and_both_pipes_are_read() -> None:
    script = ("head -c 1000000 /dev/zero | tr '\\0' e >&2; "
              "head -c 1000000 /dev/zero | tr '\\0' o; echo END")
    call = InThread(handler(), context({"argv": ["sh", "-c", script]}))
    result = call.join(30)
    assert isinstance(result, bytes) and len(result) <= MAX_OUTPUT_BYTES
    fields = json.loads(result)
    assert fields["stdout"].endswith("oooEND\n") and fields["stdout_truncated"]
    assert fields["stderr_truncated"] and set(fields["stderr"]) == {"e"}
    assert len(fields["stdout"]) + len(fields["stderr"]) > TAIL_BYTES - 256


def test_input_a_command_does_not_read_does_not_hold_it_up() -> None:
    call = InThread(handler(), context({"argv": ["true"], "stdin": "x" * 65536}))
    # An exception the call ended with fails json.loads, as it should the test.
    assert json.loads(cast(bytes, call.join(10) or b"{}"))["exit_status"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user needs root")
def test_a_configured_user_runs_the_command_with_its_home() -> None:
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("this host has no user named nobody")
    run_as = RunAs(nobody.pw_name, nobody.pw_uid, nobody.pw_gid,
                   tuple(os.getgrouplist(nobody.pw_name, nobody.pw_gid)), nobody.pw_dir)
    run = CommandHandler(CommandPolicy(ALLOW, run_as, 1.0), WORKER_ENV)
    fields = json.loads(run(context({"argv": ["sh", "-c", 'id -u; echo "$HOME"']})))
    assert fields["stdout"] == f"{nobody.pw_uid}\n{nobody.pw_dir}\n"
