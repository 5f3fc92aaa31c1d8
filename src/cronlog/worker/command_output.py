"""What the `command` handler keeps of a process's output, and the attempt output made of it.

Only tails are kept while reading: a process may write gigabytes, the run keeps 64 KiB. The
output is one JSON object, within the worker's output bound (worker/execution.py):

    {"exit_status": 0, "signal": null, "stdout": "...", "stderr": "...",
     "stdout_truncated": false, "stderr_truncated": false}

Text is the bytes decoded as UTF-8, anything else as U+FFFD. When the two tails do not fit
together, each loses its beginning: the shorter keeps up to half the room.
"""

from __future__ import annotations

import json

TAIL_BYTES = 64 * 1024
# The worker's bound on any output (worker/execution.py MAX_OUTPUT_BYTES, which imports the
# handlers, so not imported here; a unit test keeps the two equal): the JSON fits whole.
MAX_OUTPUT_BYTES = 64 * 1024


class Tail:
    """The last TAIL_BYTES of a stream, and whether anything before them was dropped."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self._limit = limit
        self._kept = bytearray()
        self.dropped = False

    def add(self, chunk: bytes) -> None:
        self._kept += chunk
        excess = len(self._kept) - self._limit
        if excess > 0:
            del self._kept[:excess]
            self.dropped = True

    def text(self) -> str:
        kept = bytes(self._kept)
        if self.dropped:
            # A cut may fall inside a character: its continuation bytes are no text.
            start = 0
            while start < min(3, len(kept)) and 0x80 <= kept[start] < 0xC0:
                start += 1
            kept = kept[start:]
        return kept.decode("utf-8", "replace")


def _size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _fit(text: str, budget: int) -> str:
    """The longest tail of text whose JSON string is at most `budget` bytes: a binary search,
    at most 18 encodings of at most 64 Ki characters."""
    if _size(text) <= budget:
        return text
    low, high = 1, len(text)  # the first start whose tail fits; the empty tail does
    while low < high:
        middle = (low + high) // 2
        if _size(text[middle:]) <= budget:
            high = middle
        else:
            low = middle + 1
    return text[low:]


def render_output(stdout: Tail, stderr: Tail, exit_status: int | None,
                  signal: int | None, limit: int = MAX_OUTPUT_BYTES) -> bytes:
    """The attempt's output, at most `limit` bytes. When the two tails do not fit together,
    the shorter keeps up to half the room and the longer the rest."""
    texts = {"stdout": stdout.text(), "stderr": stderr.text()}
    cut = {"stdout": stdout.dropped, "stderr": stderr.dropped}

    def fields() -> dict[str, object]:
        return {"exit_status": exit_status, "signal": signal, **texts,
                "stdout_truncated": cut["stdout"], "stderr_truncated": cut["stderr"]}

    sizes = {name: _size(text) for name, text in texts.items()}
    # Measured with both flags false, the longer spelling.
    room = limit - (_size({**fields(), "stdout": "", "stderr": "", "stdout_truncated": False,
                           "stderr_truncated": False}) - 2 * _size(""))
    if sum(sizes.values()) > room:
        shorter, longer = sorted(texts, key=lambda name: sizes[name])
        budgets = {shorter: min(sizes[shorter], room // 2)}
        budgets[longer] = room - budgets[shorter]
        for name, budget in budgets.items():
            if sizes[name] > budget:
                texts[name] = _fit(texts[name], budget)
                cut[name] = True
    return json.dumps(fields(), ensure_ascii=False).encode()
