"""The documents' blocks are all classified (run, shown or skipped with a reason), and the
parser the executed-documentation test relies on reads them as a reader would."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doc_blocks import DocBlockError, blocks_of, documents, shell_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("doc", documents(ROOT), ids=lambda p: p.name)
def test_every_block_of_every_document_says_whether_it_runs(doc: Path) -> None:
    for block in blocks_of(doc.relative_to(ROOT), doc.read_text()):
        if block.skip_reason is not None:
            assert len(block.skip_reason) >= 10, f"{block.where}: say why it cannot run"


def test_the_readme_and_the_reference_pages_have_commands_that_run() -> None:
    for name in ("README.md", "docs/cli.md", "docs/analytics.md", "docs/operations.md"):
        runnable = [b for b in blocks_of(ROOT / name) if b.runs]
        assert runnable, f"{name} has no block the documentation test runs"


def test_blocks_keep_their_order_lines_and_skip_reasons() -> None:
    text = ("# t\n```sh\necho one\n```\n\n<!-- docs-test: skip (needs a cluster of its own) -->"
            "\n```sh\nkafka-topics.sh --list\n```\n```text\ncronlog jobs get JOB_ID\n```\n")
    blocks = blocks_of(Path("doc.md"), text)
    assert [(b.line, b.label, b.runs) for b in blocks] == [
        (2, "sh", True), (7, "sh", False), (10, "text", False)]
    assert blocks[1].skip_reason == "needs a cluster of its own"
    assert blocks[0].text == "echo one\n"


def test_an_indented_block_is_read_without_its_indent() -> None:
    (block,) = blocks_of(Path("d.md"), "1. step\n   ```sh\n   echo hi\n   ```\n")
    assert block.text == "echo hi\n"


@pytest.mark.parametrize(("text", "error"), [
    ("```\nls\n```\n", "without a language"),
    ("```bash-ish\nls\n```\n", "unknown block language"),
    ("```sh\nls\n", "never closed"),
    ("<!-- docs-test: skip () -->\n```sh\nls\n```\n", "with the reason"),
    ("<!-- docs-test: skipp (x) -->\n```sh\nls\n```\n", "with the reason"),
    ("<!-- docs-test: skip (shown only) -->\n```text\nls\n```\n", "never run"),
])
def test_a_block_the_test_cannot_classify_is_named_with_its_line(text: str, error: str) -> None:
    with pytest.raises(DocBlockError, match=f"d.md:[0-9]+: .*{error}"):
        blocks_of(Path("d.md"), text)


def test_the_shell_script_runs_the_sh_blocks_in_order() -> None:
    text = ("```sh\nexport A=1\ncurl 127.0.0.1:50051\n```\n```sql\nSELECT 1\n```\n"
            "<!-- docs-test: skip (a long benchmark) -->\n```sh\nmake bench\n```\n"
            "```sh\necho $A\n```\n")
    script = shell_script(blocks_of(Path("d.md"), text))
    assert "make bench" not in script and "SELECT" not in script
    assert script.index("export A=1") < script.index("echo $A")
    assert "curl 127.0.0.1:50051" in script and "__block=d.md:1" in script
