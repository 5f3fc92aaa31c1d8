"""Documentation that is executed (issue 32): every `sh` block of the README and docs/*.md
runs, as written and in order, in one shell per document, against a `make run` of the
test's own; every `sql` block runs through `cronlog sql` on its history. A documented
command that stops working fails `make test`, not a newcomer's first hour.

What a block may not do here is said beside it (`<!-- docs-test: skip (why) -->`, checked by
tests/unit/test_doc_blocks.py); the test moves only the documented ports and `.cronlog/run`
onto its own run (tests/support/run_service.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.doc_blocks import DocBlock, blocks_of, documents, shell_script
from tests.support.run_service import RunService, run_service

# One document's blocks run within this; a block that waits for a run polls within it.
DOCUMENT_WITHIN_S = 240
QUERY_WITHIN_S = 60


def _blocks(doc: Path) -> list[DocBlock]:
    return blocks_of(doc, (ROOT / doc).read_text())


def _with_runnable(label: str) -> list[Path]:
    """The documents (relative to the checkout) with a `label` block to run."""
    docs = [doc.relative_to(ROOT) for doc in documents(ROOT)]
    return [doc for doc in docs if any(b.label == label and b.runs for b in _blocks(doc))]


@pytest.fixture(scope="module")
def documented_service() -> Iterator[RunService]:
    with run_service() as service:
        yield service


def _reader_shell() -> dict[str, str]:
    """A reader's terminal in the checkout: no CRONLOG_* of the test session's, and the
    environment the documents' own `export` lines build on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONLOG_")}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}:{env.get('PATH', '')}"
    return env


@pytest.mark.parametrize("doc", _with_runnable("sh"), ids=str)
def test_every_documented_command_runs(documented_service: RunService, doc: Path) -> None:
    script = documented_service.localize(shell_script(_blocks(doc)))
    result = subprocess.run(["bash", "-c", script], cwd=ROOT, env=_reader_shell(),
                            capture_output=True, text=True, timeout=DOCUMENT_WITHIN_S,
                            check=False)
    assert result.returncode == 0, (
        f"{doc}: a documented command failed\n--- stderr\n{result.stderr[-4000:]}"
        f"\n--- stdout\n{result.stdout[-2000:]}")


@pytest.mark.parametrize("doc", _with_runnable("sql"), ids=str)
def test_every_documented_query_runs(documented_service: RunService, doc: Path) -> None:
    env = {**_reader_shell(),
           "CRONLOG_ENV_FILE": str(documented_service.env_file)}
    for block in _blocks(doc):
        if block.label != "sql" or not block.runs:
            continue
        result = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "cronlog"), "sql", "--format", "tsv",
             documented_service.localize(block.text)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=QUERY_WITHIN_S,
            check=False)
        assert result.returncode == 0, f"{block.where}: {result.stderr.strip()}"
