"""What a test reads of the console's web pages: the base address the test clients use,
and a form's CSRF token."""

from __future__ import annotations

import re

BASE = "http://127.0.0.1:8080"


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)
