"""estimator.core's modules import each other without a cycle, counting imports inside
functions too: an import deferred into a function body hides a cycle, it does not break it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = "estimator.core"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (its folder is ``root``), by dotted name."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join((package, *parts))] = path
    return names


def _imported(node: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, str | None]]:
    """(module, name imported from it or None) of one import statement."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = module.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            yield base, alias.name


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Which of the package's modules each module imports, at any depth of its code.

    ``from a import b`` counts as importing ``a.b`` when that is a module, else ``a``;
    ``import a.b.c`` as importing the deepest of ``a.b.c``, ``a.b``, ``a`` that is a module.
    """
    names = module_names(root, package)
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            for base, item in _imported(node, name, is_package):
                target = f"{base}.{item}" if item and f"{base}.{item}" in names else base
                while target and target not in names:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or [] when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_estimator_core_import_graph_is_acyclic() -> None:
    graph = import_graph(ROOT / "estimator" / "core", PACKAGE)
    assert "estimator.core.estimate" in graph["estimator.core"]  # the graph was read
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("from pkg.a import f\n")
    (tmp_path / "a.py").write_text("from pkg import b\n\ndef f():\n    return b.g()\n")
    (tmp_path / "b.py").write_text("def g():\n    from .a import f\n    return f\n")
    (tmp_path / "c.py").write_text("import pkg.b\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.b"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]
    assert find_cycle({**graph, "pkg.b": set()}) == []
