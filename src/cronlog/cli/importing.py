"""`cronlog jobs import FILE`: many jobs from a JSON-lines file through CreateJobs.

Each line is one JobSpec in protobuf's JSON mapping, exactly what `jobs create --spec-json`
takes. Its request id is derived from the line's content (the JSON, canonicalised), so
running the same import again creates nothing new: every job it made answers as existing.
Lines go in batches, a few batches in flight at once; progress goes to stderr, the summary
(created, already existed, failed with line numbers and reasons) to stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

import grpc
from google.protobuf.json_format import ParseDict, ParseError

from cronlog.batching import sized_batches
from cronlog.client import ApiError, CronlogClient
from cronlog.v1 import job_service_pb2 as pb

# The api's bounds are 1,000 items and 3 MiB a batch (docs/bulk-import.md); a batch here
# stays under both with room for the request's own framing.
MOST_BATCH_ITEMS = 1000
MOST_BATCH_BYTES = 2 * 1024 * 1024
DEFAULT_BATCH_ITEMS = 500
DEFAULT_IN_FLIGHT = 4
# A whole batch refused for one of these is sent again (its items are idempotent).
TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
BATCH_ATTEMPTS = 3
REQUEST_ID_PREFIX = "import-"


class ImportUsageError(ValueError):
    """The file cannot be read at all (a bad line is that line's failure, not this)."""


@dataclass(frozen=True)
class ImportLine:
    number: int
    request_id: str
    spec: pb.JobSpec


@dataclass(frozen=True)
class LineFailure:
    number: int
    code: str
    message: str
    field: str = ""
    request_id: str = ""


@dataclass
class ImportSummary:
    created: int = 0
    already_existed: int = 0
    # Lines identical to an earlier line: one job for all of them.
    duplicates: int = 0
    failures: list[LineFailure] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"created": self.created, "already_existed": self.already_existed,
                "duplicates": self.duplicates, "failed": len(self.failures),
                "failures": [{"line": f.number, "code": f.code, "message": f.message,
                              "field": f.field, "request_id": f.request_id}
                             for f in sorted(self.failures, key=lambda f: f.number)]}


def request_id_of(spec_json: Any) -> str:
    """The line's request id: a digest of its JSON with keys sorted and no spacing, so the
    same job spec gets the same id however the line is formatted."""
    canonical = json.dumps(spec_json, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    return REQUEST_ID_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()


def parse_line(number: int, text: str, tenant: str | None) -> ImportLine | LineFailure:
    """One line as a request, or why it cannot be one. `tenant` fills a spec without one
    (after the request id is taken, so the id is the line's alone)."""
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        return LineFailure(number, "INVALID_ARGUMENT", f"not JSON: {exc}", "line")
    if not isinstance(loaded, dict):
        return LineFailure(number, "INVALID_ARGUMENT",
                           "a line is one JobSpec as a JSON object", "line")
    spec = pb.JobSpec()
    try:
        ParseDict(loaded, spec)
    except ParseError as exc:
        return LineFailure(number, "INVALID_ARGUMENT", f"not a JobSpec: {exc}", "spec")
    if tenant and not spec.tenant:
        spec.tenant = tenant
    return ImportLine(number, request_id_of(loaded), spec)


def read_lines(lines: Iterable[str], tenant: str | None
               ) -> Iterator[ImportLine | LineFailure]:
    """Every non-blank line, numbered from 1 as editors number them."""
    for number, text in enumerate(lines, start=1):
        if text.strip():
            yield parse_line(number, text, tenant)


def batches(lines: Iterator[ImportLine], most_items: int,
            most_bytes: int = MOST_BATCH_BYTES) -> Iterator[list[ImportLine]]:
    """Lines in batches of at most most_items and about most_bytes of specs each."""
    return sized_batches(lines, lambda line: line.spec.ByteSize() + len(line.request_id) + 16,
                         most_items, most_bytes)


def item_failure(line: ImportLine, error: pb.ItemError) -> LineFailure:
    # The api names the field within its request (`items[3].spec.cron`); here the line is
    # the item.
    _, dot, within = error.field.partition("].")
    return LineFailure(line.number, error.code, error.message,
                       within if dot else error.field, line.request_id)


class Progress:
    """A plain-text bar on stderr: redrawn in place on a terminal, a line now and then
    otherwise (a log file gets a few lines, not thousands)."""

    def __init__(self, total: int, out: TextIO | None) -> None:
        """total: lines expected (0 when unknown: the bar shows counts only); out None:
        nothing is shown."""
        self._total = total
        self._out = out
        self._tty = out is not None and out.isatty()
        self._started = time.monotonic()
        self._shown_at = 0.0
        self._done = 0

    def advance(self, done: int) -> None:
        self._done += done
        now = time.monotonic()
        if self._out is None or (now - self._shown_at < (0.1 if self._tty else 5.0)
                                 and self._done != self._total):
            return
        self._shown_at = now
        self._out.write(("\r" + self.line(now)) if self._tty else self.line(now) + "\n")
        self._out.flush()

    def line(self, now: float) -> str:
        rate = self._done / max(now - self._started, 1e-6)
        if not self._total:
            return f"{self._done:,} lines {rate:,.0f}/s"
        filled = 30 * min(self._done, self._total) // self._total
        return (f"[{'#' * filled}{'.' * (30 - filled)}] {self._done:,}/{self._total:,} lines "
                f"{rate:,.0f}/s")

    def finish(self) -> None:
        if self._out is not None and self._tty:
            self._out.write("\n")
            self._out.flush()


def send_batch(client: CronlogClient, batch: Sequence[ImportLine],
               summary: ImportSummary) -> None:
    items = [pb.CreateJobRequest(request_id=line.request_id, spec=line.spec) for line in batch]
    for attempt in range(1, BATCH_ATTEMPTS + 1):
        try:
            results = client.create_jobs(items)
            break
        except ApiError as exc:
            if exc.code in TRANSIENT and attempt < BATCH_ATTEMPTS:
                time.sleep(0.5 * attempt)
                continue
            summary.failures.extend(
                LineFailure(line.number, exc.code_name, exc.message, "", line.request_id)
                for line in batch)
            return
    for line, result in zip(batch, results, strict=True):
        if result.HasField("job"):
            if result.job.already_existed:
                summary.already_existed += 1
            else:
                summary.created += 1
        else:
            summary.failures.append(item_failure(line, result.error))


def import_jobs(client: CronlogClient, lines: Iterable[str], *, tenant: str | None = None,
                batch_items: int = DEFAULT_BATCH_ITEMS, in_flight: int = DEFAULT_IN_FLIGHT,
                progress: Progress | None = None) -> ImportSummary:
    """Streams the lines: at most `in_flight` batches are read ahead of the api's answers,
    so a file of a million jobs needs no more memory than a few batches (and a digest per
    line, to find repeated lines)."""
    summary = ImportSummary()
    seen: set[str] = set()
    shown = progress or Progress(0, None)

    def sendable() -> Iterator[ImportLine]:
        for parsed in read_lines(lines, tenant):
            if isinstance(parsed, LineFailure):
                summary.failures.append(parsed)
                shown.advance(1)
            elif parsed.request_id in seen:
                summary.duplicates += 1
                shown.advance(1)
            else:
                seen.add(parsed.request_id)
                yield parsed

    def one(batch: list[ImportLine]) -> int:
        # Batches update the summary from their own threads: the GIL keeps the counters
        # whole, and failures are only appended.
        send_batch(client, batch, summary)
        return len(batch)

    with ThreadPoolExecutor(max_workers=in_flight) as pool:
        pending: deque[Future[int]] = deque()
        for batch in batches(sendable(), batch_items):
            pending.append(pool.submit(one, batch))
            while len(pending) >= in_flight:
                shown.advance(pending.popleft().result())
        while pending:
            shown.advance(pending.popleft().result())
    shown.finish()
    return summary


def add_import_command(jobs: argparse._SubParsersAction[argparse.ArgumentParser],
                       common: argparse.ArgumentParser) -> None:
    parser = jobs.add_parser(
        "import", parents=[common],
        help="create many jobs from a JSON-lines file of JobSpecs (docs/bulk-import.md)")
    parser.add_argument("file", help="one JobSpec in protobuf JSON a line (as --spec-json); "
                                     "'-' reads stdin")
    parser.add_argument("--tenant", help="the tenant of lines that name none")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_ITEMS,
                        help=f"jobs per CreateJobs call (1-{MOST_BATCH_ITEMS}, default "
                             f"{DEFAULT_BATCH_ITEMS})")
    parser.add_argument("--in-flight", type=int, default=DEFAULT_IN_FLIGHT,
                        help=f"batches sent at once (1-16, default {DEFAULT_IN_FLIGHT})")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _text_summary(summary: ImportSummary) -> str:
    shown = [f"created: {summary.created}", f"already existed: {summary.already_existed}",
             f"duplicate lines: {summary.duplicates}", f"failed: {len(summary.failures)}"]
    for failure in sorted(summary.failures, key=lambda f: f.number):
        where = f" ({failure.field})" if failure.field else ""
        shown.append(f"  line {failure.number}: {failure.code}: {failure.message}{where}")
    return "\n".join(shown)


def run_import(args: argparse.Namespace, client: CronlogClient) -> int:
    """Exit 0 when every line made or found its job, 1 when some failed, 2 on bad usage."""
    prog = "cronlog jobs import"
    try:
        if not 1 <= args.batch_size <= MOST_BATCH_ITEMS:
            raise ImportUsageError(f"--batch-size: 1 to {MOST_BATCH_ITEMS}")
        if not 1 <= args.in_flight <= 16:
            raise ImportUsageError("--in-flight: 1 to 16")
        total = 0 if args.file == "-" else _count_lines(args.file)
        progress = Progress(total, None if args.quiet else sys.stderr)
        with _opened(args.file) as lines:
            summary = import_jobs(client, lines, tenant=args.tenant,
                                  batch_items=args.batch_size, in_flight=args.in_flight,
                                  progress=progress)
    except ImportUsageError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if args.output_format == "table":
        print(_text_summary(summary))
    else:
        print(json.dumps(summary.as_dict(), indent=2))
    return 1 if summary.failures else 0


def _count_lines(path: str) -> int:
    """Non-blank lines, for the bar's total: a quick pass before the real one."""
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for text in f if text.strip())
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportUsageError(f"cannot read {path!r}: {exc}") from None


@contextmanager
def _opened(path: str) -> Iterator[Iterator[str]]:
    if path == "-":
        yield iter(sys.stdin)
        return
    try:
        with open(path, encoding="utf-8") as f:
            yield _decoded(f, path)
    except OSError as exc:
        raise ImportUsageError(f"cannot read {path!r}: {exc}") from None


def _decoded(lines: Iterable[str], path: str) -> Iterator[str]:
    try:
        yield from lines
    except UnicodeDecodeError as exc:
        raise ImportUsageError(f"{path!r} is not UTF-8 text: {exc}") from None
