"""What `pip install cronlog` brings: the service and its client, not the development tools
(dev/, the cronlog-dev distribution) nor the benchmark's peer."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "src" / "cronlog"
# Top-level modules only the development tools may import.
DEV_ONLY = {"cronlog_dev", "pgqueuer", "asyncpg", "uvloop", "psutil", "pytest", "hypothesis", "chdb"}


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_runtime_package_imports_no_development_tool() -> None:
    offenders = {str(path.relative_to(ROOT)): sorted(imported_top_levels(path) & DEV_ONLY)
                 for path in RUNTIME.rglob("*.py")}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_development_tools_live_outside_the_runtime_package() -> None:
    assert not (RUNTIME / "infra" / "bench").exists()
    assert not (RUNTIME / "infra" / "stack").exists()
    assert (ROOT / "dev" / "src" / "cronlog_dev" / "bench").is_dir()
    assert (ROOT / "dev" / "src" / "cronlog_dev" / "stack").is_dir()


def requirement_name(requirement: str) -> str:
    for stop in "[=<>!~; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.lower()


def test_the_base_install_has_no_bench_or_test_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert set(extras) >= {"client", "bench", "test", "dev"}
    assert base.isdisjoint(requirement_name(r) for r in extras["bench"] + extras["test"])
    # Time zone rules change every year: an installation can take newer ones.
    tzdata = [r for r in project["dependencies"] if requirement_name(r) == "tzdata"]
    assert tzdata and "==" not in tzdata[0]
    assert (ROOT / project["license-files"][0]).is_file()
