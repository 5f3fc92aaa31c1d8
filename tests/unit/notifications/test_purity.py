"""The notifier's core stays pure (invariant 7, docs/alerts.md): its modules import no I/O
library (no Kafka, SQL, gRPC, HTTP, SMTP, sockets) and read no clock; `now` is passed in."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "cronlog" / "notifications"
ALLOWED = {"__future__", "base64", "binascii", "collections", "dataclasses", "datetime", "enum",
           "hashlib", "hmac", "heapq", "json", "re", "types", "typing", "uuid",
           "sortedcontainers", "cronlog"}
# The pure model (domain/): channel names, InvalidSpec.
ALLOWED_CRONLOG = ("cronlog.notifications", "cronlog.domain")
CLOCK_READS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "time_ns"}


def modules() -> list[Path]:
    found = sorted(PACKAGE.glob("*.py"))
    assert len(found) >= 7, "the package's modules were found"
    return found


def test_the_core_imports_nothing_that_does_io() -> None:
    offenders = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                if top not in ALLOWED or (top == "cronlog"
                                          and not name.startswith(ALLOWED_CRONLOG)):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_the_core_reads_no_clock() -> None:
    calls = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in CLOCK_READS):
                calls.append(f"{path.name}:{node.lineno}: .{node.func.attr}()")
    assert calls == []
