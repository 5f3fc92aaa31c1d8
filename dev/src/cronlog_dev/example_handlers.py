"""The example handlers (examples/handlers) on `make run`'s worker, so a newcomer's first job
can run code like their own (README, "Run your own code"): the package's sources go on the
worker's PYTHONPATH and CRONLOG_WORKER_HANDLERS names it, unless the user names their own."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# The checkout's, like the shipped Prometheus rules: cronlog-dev is installed editable.
EXAMPLE_SOURCES = Path(__file__).resolve().parents[3] / "examples" / "handlers" / "src"
EXAMPLE_PACKAGE = "cronlog_example_handlers"
EXAMPLE_MODULE = f"{EXAMPLE_PACKAGE}.jobs"  # as its entry point names it
SETTING = "CRONLOG_WORKER_HANDLERS"


def example_defaults(sources: Path = EXAMPLE_SOURCES) -> dict[str, str]:
    """The stack's default for CRONLOG_WORKER_HANDLERS; none outside a checkout."""
    return {SETTING: EXAMPLE_MODULE} if (sources / EXAMPLE_PACKAGE).is_dir() else {}


def worker_path(inherited: Mapping[str, str], sources: Path = EXAMPLE_SOURCES
                ) -> dict[str, str]:
    """PYTHONPATH for the worker: the example's sources before what the user had."""
    if not (sources / EXAMPLE_PACKAGE).is_dir():
        return {}
    return {"PYTHONPATH": os.pathsep.join(
        p for p in (str(sources), inherited.get("PYTHONPATH", "")) if p)}
