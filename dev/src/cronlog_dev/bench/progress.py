"""Progress lines on stdout, so a long run shows where it is."""

from __future__ import annotations

import time


def say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)
