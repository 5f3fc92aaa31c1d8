"""docs/client.md's example is Python that compiles, and every client method it or its
list names exists."""

from __future__ import annotations

import re
from pathlib import Path

from cronlog.client import CronlogClient

DOC = Path(__file__).resolve().parents[3] / "docs" / "client.md"


# Backticked snake_case words of the page that are not methods.
NOT_METHODS = {"next_page_token", "ca_file", "request_id"}


def test_the_example_compiles_and_names_only_methods_the_client_has() -> None:
    text = DOC.read_text()
    (example,) = re.findall(r"```python\n(.*?)```", text, re.S)
    compile(example, str(DOC), "exec")
    called = set(re.findall(r"client\.(\w+)\(", example))
    assert called >= {"create_job", "trigger_job", "all_jobs", "backfill_job", "update_job"}
    listed = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", text)) - NOT_METHODS
    assert len(listed) > 15, "the page's list of methods was read"
    assert sorted(n for n in called | listed if not hasattr(CronlogClient, n)) == []
