"""No import circles in src/cronlog, counting the imports inside functions too: a circle
hidden by an import moved into a function is still two modules that cannot be understood
(or changed) one without the other. Imports under `if TYPE_CHECKING:` do not count; they
never run."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"


def _module_names() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        if name.startswith("cronlog.v1"):  # generated
            continue
        modules[name] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    found: set[str] = set()

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _is_type_checking(node.test):
                for statement in node.orelse:
                    self.visit(statement)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            assert node.level == 0, f"{path}: relative import"
            module = node.module or ""
            for alias in node.names:
                whole = f"{module}.{alias.name}"
                found.add(whole if whole in modules else module)

    Imports().visit(ast.parse(path.read_text()))
    return {name for name in found if name in modules}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for child in edges:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_circles_finds_a_circle_and_only_that() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_no_module_of_cronlog_imports_itself_through_others() -> None:
    modules = _module_names()
    graph = {name: _imports(path, modules) - {name} for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 300, "the imports were read"
    assert circles(graph) == []


def test_the_api_and_the_owner_sides_of_the_write_path_import_nothing_of_each_other() -> None:
    modules = _module_names()
    sides = {"cronlog.commands.api": "cronlog.commands.owner",
             "cronlog.commands.owner": "cronlog.commands.api"}
    crossing = []
    for name, path in modules.items():
        for side, other in sides.items():
            if name.startswith(side + "."):
                crossing += [(name, i) for i in _imports(path, modules) if i.startswith(other)]
    assert sum(n.startswith("cronlog.commands.api.") for n in modules) >= 6, "the sides exist"
    assert crossing == []
