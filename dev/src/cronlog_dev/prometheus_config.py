"""A Prometheus configuration that scrapes cronlog's roles, with the scrape jobs named as
the shipped alert rules expect (`cronlog-<role>`, deploy/prometheus/cronlog-rules.yml).
`make run` writes one beside its logs; the Prometheus e2e test runs a server on one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

# The rules shipped in the repository (the source tree's, not an installed copy's).
RULES_FILE = Path(__file__).resolve().parents[3] / "deploy" / "prometheus" / "cronlog-rules.yml"


def scrape_job(role: str) -> str:
    return f"cronlog-{role}"


def prometheus_config(targets: Mapping[str, str], interval_seconds: float = 15.0,
                      rule_files: tuple[Path, ...] = (RULES_FILE,)) -> str:
    """targets: role -> host:port of its operator endpoints. JSON, which is YAML too: no
    YAML library needed, and nothing to quote by hand."""
    interval = f"{int(interval_seconds * 1000)}ms"
    return json.dumps({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {"job_name": scrape_job(role), "metrics_path": "/metrics",
             "static_configs": [{"targets": [address]}]}
            for role, address in targets.items()],
    }, indent=2) + "\n"
