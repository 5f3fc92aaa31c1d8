"""The fenced blocks of the README and docs/*.md, for the test that runs them
(tests/e2e/test_documented_commands.py): a documented command that no longer works fails
`make test` instead of a newcomer's first hour (issue 32).

Every block names its language. `sh` blocks are commands to run as written, in order, in one
shell per document; `sql` blocks are queries on the run history, run through `cronlog sql`.
Any other label is shown, not run (a usage synopsis with placeholders is `text`). A `sh` or
`sql` block that cannot run here says why in the line before it:
`<!-- docs-test: skip (the reason) -->`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUN_LABELS = frozenset({"sh", "sql"})
SHOWN_LABELS = frozenset({"text", "proto", "json", "jsonl", "properties", "python", "yaml",
                          "tsv", "xml", "toml"})
_FENCE = re.compile(r"^(\s*)```(.*)$")
_SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\s*\((?P<reason>.*)\)\s*-->$")
_MARKER = re.compile(r"^<!--\s*docs-test\b")


class DocBlockError(ValueError):
    """A document whose blocks the test cannot classify: named with file and line."""


@dataclass(frozen=True)
class DocBlock:
    path: Path
    line: int  # of the opening fence, 1-based
    label: str
    text: str
    skip_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.label in RUN_LABELS and self.skip_reason is None


def blocks_of(path: Path, text: str | None = None) -> list[DocBlock]:
    """Every fenced block of a Markdown file, in order. At most one pass over its lines."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks: list[DocBlock] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, label = opening.group(1), opening.group(2).strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise DocBlockError(f"{path}:{start + 1}: a block that is never closed")
        i += 1
        if not label:
            raise DocBlockError(
                f"{path}:{start + 1}: a block without a language; say `sh` or `sql` for "
                f"commands to run, or one of {sorted(SHOWN_LABELS)} for text to show")
        if label not in RUN_LABELS | SHOWN_LABELS:
            raise DocBlockError(f"{path}:{start + 1}: unknown block language {label!r}")
        blocks.append(DocBlock(path, start + 1, label, "\n".join(body) + "\n",
                               _skip_reason(path, lines, start, label)))
    return blocks


def _skip_reason(path: Path, lines: list[str], fence: int, label: str) -> str | None:
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    if before < 0 or not _MARKER.match(lines[before].strip()):
        return None
    marker = _SKIP.match(lines[before].strip())
    if marker is None or not marker.group("reason").strip():
        raise DocBlockError(f"{path}:{before + 1}: write `<!-- docs-test: skip (why) -->`, "
                            "with the reason")
    if label not in RUN_LABELS:
        raise DocBlockError(f"{path}:{before + 1}: a skip marker on a {label!r} block, "
                            "which is never run")
    return marker.group("reason").strip()


def documents(root: Path) -> list[Path]:
    """The README and every page of docs/, as a reader finds them."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def shell_script(blocks: list[DocBlock]) -> str:
    """One bash script running a document's `sh` blocks in order, so a block may use what an
    earlier one exported, as a reader's terminal would. A failing command stops it, naming
    its block."""
    parts = ["set -euo pipefail",
             "trap 'echo \"docs-test: the block at $__block failed (exit $?)\" >&2' ERR"]
    for block in blocks:
        if block.label != "sh" or not block.runs:
            continue
        parts.append(f"__block={block.where}")
        parts.append(block.text)
    return "\n".join(parts) + "\n"
