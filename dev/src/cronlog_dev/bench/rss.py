"""Peak resident memory of the measured processes while a workload runs."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import psutil

_MIB = 1024 * 1024


def vm_hwm_bytes(pid: int) -> int | None:
    """The kernel's high-water mark of the process's resident set, over its whole life."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class RssPeak:
    # Largest RSS sampled while the workload ran.
    sampled_mib: float
    # The kernel's lifetime peak (VmHWM), read just before the process was stopped.
    hwm_mib: float | None


class RssSampler:
    """Samples the RSS of named processes on a thread until stopped.

    The processes live for one workload only, so the kernel's VmHWM covers the same span;
    sampling is kept as well to show the figure does not hinge on one reading.
    """

    def __init__(self, interval: float = 0.25) -> None:
        self._interval = interval
        self._procs: dict[str, psutil.Process] = {}
        self._peaks: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)
        self._result: dict[str, RssPeak] | None = None

    def watch(self, name: str, pid: int) -> None:
        with self._lock:
            self._procs[name] = psutil.Process(pid)
            self._peaks.setdefault(name, 0)

    def start(self) -> None:
        self._thread.start()

    def _sample(self) -> None:
        with self._lock:
            procs = list(self._procs.items())
        for name, proc in procs:
            try:
                rss = int(proc.memory_info().rss)
            except psutil.Error:
                continue
            with self._lock:
                self._peaks[name] = max(self._peaks[name], rss)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def stop(self) -> dict[str, RssPeak]:
        """Stops sampling; call while the processes are still alive, for their VmHWM. Later
        calls return the first answer."""
        if self._result is not None:
            return self._result
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        self._sample()
        with self._lock:
            result: dict[str, RssPeak] = {}
            for name, proc in self._procs.items():
                hwm = vm_hwm_bytes(proc.pid)
                result[name] = RssPeak(round(self._peaks[name] / _MIB, 1),
                                       None if hwm is None else round(hwm / _MIB, 1))
            self._result = result
        return result
