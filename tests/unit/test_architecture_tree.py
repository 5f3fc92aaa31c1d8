"""docs/architecture.md's package tree names every package under src/cronlog: a folder
added without its line in the picture fails here."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_tree_names_every_package() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    tree = doc[doc.index("src/cronlog/"):doc.index("dev/src/cronlog_dev/")]
    packages = {p.parent.name for p in (ROOT / "src" / "cronlog").rglob("__init__.py")
                if p.parent.name != "cronlog"}
    assert packages, "src/cronlog has packages"
    missing = sorted(name for name in packages if f"{name}/" not in tree)
    assert missing == [], f"add these folders to docs/architecture.md's tree: {missing}"
