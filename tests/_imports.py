"""The import graph of ``src/factrl``, read with :mod:`ast` (no module is imported).

Every ``import factrl...`` and ``from factrl... import ...`` counts, module-level or inside
a function (a lazy import is still a dependency), relative imports resolved. ``from
factrl.x import y`` is an edge to ``factrl.x.y`` when that is a module, else to
``factrl.x``."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


def modules(src: Path) -> dict[str, Path]:
    """Dotted name → file, for every module and package under ``src/factrl``."""
    out: dict[str, Path] = {}
    for path in sorted((src / "factrl").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def edges(src: Path) -> list[Edge]:
    mods = modules(src)
    out: list[Edge] = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                out += [Edge(name, a.name, node.lineno) for a in node.names if _ours(a.name)]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not _ours(target):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    out.append(Edge(name, sub if sub in mods else target, node.lineno))
    return out


def _ours(name: str) -> bool:
    return name == "factrl" or name.startswith("factrl.")


def component(name: str) -> str:
    """The top-level part of ``factrl`` a module belongs to (``factrl.envs.rar`` → ``envs``;
    ``factrl`` itself → ``factrl``)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "factrl"


def cycles(graph_edges: Iterable[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for e in graph_edges:
        if e.importer != e.imported:
            graph.setdefault(e.importer, set()).add(e.imported)
            graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found
