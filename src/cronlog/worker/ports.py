"""The small interfaces through which a worker talks to the log."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from cronlog.ports import InboundMessage, Record


class DispatchSource(Protocol):
    """The dispatch topic of a queue, consumed as a member of the queue's worker group."""

    def poll(self, timeout: float, max_messages: int) -> Sequence[InboundMessage]: ...

    def commit(self, next_offsets: Mapping[int, int]) -> None: ...

    def on_revoke(self, listener: Callable[[list[int]], None]) -> None: ...

    def close(self) -> None: ...


class ReportSink(Protocol):
    """Where workers send what happened to an attempt (the inbox)."""

    def send(self, key: str, name: str, record: Record) -> None: ...

    def prepare(self, key: str) -> None:
        """Reports with this key will follow (a dispatch arrived): whatever work per key
        the sink has, it does now, not when the run starts."""

    def ship(self) -> None:
        """Sends what send() may have gathered; called every time round the worker's loop."""

    @property
    def gathered(self) -> int:
        """Reports gathered and not shipped yet (none, for a sink that sends at once)."""

    def flush(self, timeout: float) -> None: ...


class ReportsNotDelivered(RuntimeError):
    """Worker reports are not acknowledged by the log yet (e.g. while a broker restarts)."""


class WorkerMetrics(Protocol):
    """What a worker's loop tells operators; infra/observability exports it as the
    cronlog_worker_* metrics. Called on the loop and the handler threads: cheap, no I/O."""

    def run_started(self, lag_seconds: float, late_cause: str | None) -> None:
        """A handler started lag_seconds after its due time; late_cause says why when the
        start counts as late (`arrived_late` or `waited_here`)."""

    def handler_finished(self, handler: str, outcome: str, seconds: float) -> None: ...

    def attempt_cancelled(self, stage: str) -> None:
        """stage: `held` (dropped before it started) or `running` (told to stop)."""

    def attempts_lost(self, reason: str, count: int) -> None:
        """Attempts whose reports this worker gave up: the owner finds them lost."""


class NoWorkerMetrics:
    """A worker nobody watches (tests, tools)."""

    def run_started(self, lag_seconds: float, late_cause: str | None) -> None:
        pass

    def handler_finished(self, handler: str, outcome: str, seconds: float) -> None:
        pass

    def attempt_cancelled(self, stage: str) -> None:
        pass

    def attempts_lost(self, reason: str, count: int) -> None:
        pass
