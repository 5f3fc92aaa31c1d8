"""cronlog.client is what a user program imports: it must not bring the service with it."""

from __future__ import annotations

import subprocess
import sys


def test_the_client_loads_no_server_code() -> None:
    probe = ("import sys, cronlog.client; "
             "print(' '.join(sorted(m for m in sys.modules if m.startswith('cronlog'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout.split()
    assert "cronlog.client.client" in loaded, loaded
    others = [m for m in loaded if m != "cronlog" and not m.startswith(("cronlog.client",
                                                                         "cronlog.v1"))]
    assert others == []
