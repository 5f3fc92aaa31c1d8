"""The metrics-cost workload: the steady workload run in pairs, first with the roles serving
no /metrics (as before issue 17: no metrics are kept at all then), then with every role
serving /metrics and scraped every 15 s as Prometheus would. Each run measures the CPU its
scheduler, worker and projector processes used over the same window of fire times."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

from cronlog.infra.config import Settings
from cronlog_dev.bench import cronlog_workloads
from cronlog_dev.bench.cronlog_service import CronlogService
from cronlog_dev.bench.metrics_cost_figures import (
    MetricsCostResult,
    MetricsCostRun,
    differences,
)
from cronlog_dev.bench.options import BenchOptions
from cronlog_dev.bench.progress import say
from cronlog_dev.bench.role_cpu import RoleCpuWindow

# Prometheus's usual scrape interval.
SCRAPE_INTERVAL = 15.0
# After the last fire time, how long the window stays open: the last runs start, finish
# and are reported, and their owners record the reports.
TAIL_SECONDS = 10.0
SOURCE = ("user + system CPU seconds of each process tree (psutil, from /proc/<pid>/stat) from "
          "1 s plus the lookahead before the window's first fire time to "
          f"{TAIL_SECONDS:.0f} s after its last, divided by the runs due in the window that "
          "started; metrics on: every role serves /metrics on its own port (with librdkafka "
          f"statistics) and the bench scrapes each every {SCRAPE_INTERVAL:.0f} s")


class Scraper:
    """GETs each /metrics URL every interval, as Prometheus would."""

    def __init__(self, urls: list[str], interval: float = SCRAPE_INTERVAL) -> None:
        self._urls = urls
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)
        self.ok = 0
        self.failed = 0

    def start(self) -> None:
        self._thread.start()

    def _scrape(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status == 200 and b"cronlog_" in answer.read()
        except OSError:
            return False

    def _run(self) -> None:
        # The first scrape an interval after the start, when every process listens.
        while not self._stop.wait(self._interval):
            for url in self._urls:
                if self._scrape(url):
                    self.ok += 1
                else:
                    self.failed += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)


class MetricsCostWatch:
    """What one steady run of the pair needs beyond the steady workload (a SteadyWatch):
    metrics ports for its processes, a scraper, and the CPU read at the window's edges."""

    def __init__(self, metrics: bool) -> None:
        self.metrics = metrics
        self._service: CronlogService | None = None
        self._scraper: Scraper | None = None
        self._cpu: RoleCpuWindow | None = None
        self.window_seconds = 0.0
        self.core_seconds: dict[str, float] = {}
        self.notes: list[str] = []

    def started(self, service: CronlogService) -> None:
        self._service = service
        if self.metrics:
            self._scraper = Scraper(sorted(service.metrics_urls.values()))
            self._scraper.start()

    def window(self, first_due: float, seconds: int, lookahead: float) -> None:
        """Reads the CPU, on a thread, at the window's start (the lookahead before its first
        fire time, when the owners begin to dispatch its runs) and at its end, whenever the
        workload gets to look."""
        if self._service is None:
            raise RuntimeError("window() before started()")
        self._cpu = RoleCpuWindow(self._service.pids, TAIL_SECONDS)
        self._cpu.begin(first_due, seconds, lookahead)

    def finish(self) -> None:
        """Waits until the window's end was read; call once its runs have started."""
        if self._cpu is None:
            raise RuntimeError("finish() before window()")
        used = self._cpu.end(runs=0)
        self.notes += self._cpu.notes
        if used is not None:
            self.window_seconds, self.core_seconds = used.window_seconds, used.core_seconds

    def stop(self) -> None:
        if self._cpu is not None:
            self._cpu.stop()
        if self._scraper is not None:
            self._scraper.stop()

    @property
    def scrapes(self) -> tuple[int, int]:
        return (0, 0) if self._scraper is None else (self._scraper.ok, self._scraper.failed)


def run_metrics_cost(stack_settings: Settings, options: BenchOptions,
                     log_root: Path) -> MetricsCostResult:
    runs: list[MetricsCostRun] = []
    notes: list[str] = []
    for pair in range(1, options.metrics_cost_pairs + 1):
        # Off first: a drift of the shared machine over the pair then shows against metrics.
        for metrics in (False, True):
            side = "on" if metrics else "off"
            say(f"[cronlog] metrics cost: pair {pair}, metrics {side}")
            watch = MetricsCostWatch(metrics)
            result = cronlog_workloads.run_steady(stack_settings, options, log_root,
                                                  workload=f"metrics_{side}_{pair}",
                                                  watch=watch)
            ok, failed = watch.scrapes
            run = MetricsCostRun(pair, metrics, result.figures.due, result.figures.started,
                                 watch.window_seconds, watch.core_seconds,
                                 result.figures.lag.p99_ms, ok, failed,
                                 notes=[*watch.notes, *result.notes])
            lag = result.figures.lag
            if (run.runs < run.due or lag.max_ms is None
                    or lag.max_ms > TAIL_SECONDS * 1000 or not run.core_seconds):
                run.complete = False
                run.notes.append(f"not every due run started within {TAIL_SECONDS:.0f} s of "
                                 "its time: part of their work fell outside the CPU window, "
                                 "so the figure is low; left out of the pooled difference")
            if metrics and ok == 0:
                run.notes.append("no scrape answered: this run did not measure metrics")
            say(f"[cronlog] metrics {side}: {run.runs:,} runs in {run.window_seconds:.0f} s, "
                + ", ".join(f"{role} {run.per_thousand(role) or 0:.3f} CPU s per 1k runs"
                            for role in ("scheduler", "worker", "projector"))
                + (f", scrapes {ok} ok / {failed} failed" if metrics else ""))
            notes += [f"pair {pair} metrics {side}: {n}" for n in run.notes]
            runs.append(run)
    return MetricsCostResult("cronlog", options.steady_rate, options.steady_seconds,
                             SCRAPE_INTERVAL, runs, differences(runs), SOURCE, notes=notes)
