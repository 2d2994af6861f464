"""The layer contract of ``src/factrl`` (docs/architecture.md), checked over the import
graph: no module imports a layer above its own, the two sibling layers ``envs`` and
``metrics`` do not import each other, and no two modules import each other (directly or
round a longer circle). Lazy imports inside functions count like any other.

The only imports allowed to break the contract are the ones docs/architecture.md lists
under "Exceptions", each with its reason; an exception that no longer occurs must be
removed from the list too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _imports import Edge, component, cycles, edges, modules
from _support import REPO

SRC = REPO / "src"
DOC = REPO / "docs" / "architecture.md"

# Top to bottom. A module may import its own layer and the layers below it.
LAYERS: list[set[str]] = [
    {"cli", "demo", "__main__"},  # entry points (`python -m factrl` included)
    {"recipes"},  # multi-stage recipes (train, then evaluate, then report)
    {"train", "teachers"},  # training: algorithms, integrations (verl) | rule-based teachers
    {"evaluate"},  # evaluation runs
    {"report"},  # pages and tables of run directories
    {"runs", "runlock"},  # the run directory: format, lock, run info, trajectory I/O
    {"components"},  # the run builder: RunSpec -> environments, reward, LMs
    {"rollout", "forced"},  # many episodes, batched; forced answering
    {"episode"},  # one episode's state machine
    {"rewards"},  # scoring of one trajectory for training
    {"envs", "metrics"},  # agents' environments | scoring of runs (independent siblings)
    {"lm", "retrieval", "verifier", "datasets", "presets"},  # backends and data
    {"corpus"},  # documents, sentences, readers
    {"protocol"},  # the text protocol every reader of model text shares
    {"types", "labels", "registry", "serving", "factrl"},  # records, label vocabularies, registries
]
# Sibling layers that must not import each other.
INDEPENDENT: list[tuple[str, str]] = [("envs", "metrics")]
# Old import paths kept as thin re-exports for code outside the package; nothing inside
# ``src/factrl`` may import them.
ALIASES: dict[str, str] = {
    "factrl.envs.tags": "factrl.protocol.tags",
    "factrl.envs.textparse": "factrl.protocol.text",
    "factrl.runlock": "factrl.runs.lock",
    "factrl.train.teacher": "factrl.teachers",
    "factrl.train.profact_teacher": "factrl.teachers.profact",
}


# A hard ceiling on a module's length: STYLE.md asks for modules under ~400 lines; the
# margin lets a module grow a little before CI asks for the split. No exceptions.
MAX_MODULE_LINES = 450


def long_modules(src: Path, limit: int = MAX_MODULE_LINES) -> dict[str, int]:
    """Dotted name → line count of every module under ``src/factrl`` longer than ``limit``."""
    out = {}
    for name, path in modules(src).items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out[name] = n
    return out


def _layer(comp: str) -> int:
    for i, names in enumerate(LAYERS):
        if comp in names:
            return len(LAYERS) - i
    raise AssertionError(f"factrl.{comp} is in no layer of tests/test_architecture.py: place it")


def violations(graph: list[Edge]) -> set[tuple[str, str]]:
    """(importer, imported) pairs that break the layer or independence contract."""
    bad: set[tuple[str, str]] = set()
    for e in graph:
        a, b = component(e.importer), component(e.imported)
        if a == b:
            continue
        if _layer(b) > _layer(a) or (a, b) in INDEPENDENT or (b, a) in INDEPENDENT:
            bad.add((e.importer, e.imported))
    return bad


_ROW = re.compile(r"^\|\s*`(factrl[\w.]*)`\s*\|\s*`(factrl[\w.]*)`\s*\|\s*(\S.*?)\s*\|\s*$")


def documented_exceptions(text: str) -> dict[tuple[str, str], str]:
    """The rows of the table under the "## Exceptions" heading: importer, imported, why."""
    section = text.split("\n## Exceptions", 1)
    assert len(section) == 2, f"{DOC} has no '## Exceptions' section"
    body = section[1].split("\n## ", 1)[0]
    return {(m[1], m[2]): m[3] for line in body.splitlines() if (m := _ROW.match(line))}


@pytest.fixture(scope="module")
def graph() -> list[Edge]:
    return edges(SRC)


def test_the_document_lists_the_layers_and_aliases() -> None:
    text = DOC.read_text(encoding="utf-8")
    layers = text.split("\n## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [set(re.findall(r"`(\w+)`", line.split("|")[2])) for line in layers.splitlines()
            if line.startswith("| ") and not line.startswith("| layer")]
    assert rows == LAYERS, "docs/architecture.md's layer table differs from LAYERS"
    for alias, target in ALIASES.items():
        assert f"| `{alias}` | `{target}` |" in text, f"docs/architecture.md does not list the alias {alias}"


def test_every_component_has_a_layer() -> None:
    for name in modules(SRC):
        _layer(component(name))


def test_no_import_circles(graph: list[Edge]) -> None:
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_upward_imports_except_documented(graph: list[Edge]) -> None:
    allowed = documented_exceptions(DOC.read_text(encoding="utf-8"))
    bad = violations(graph)
    lines = {(e.importer, e.imported): e.line for e in graph}
    unexpected = sorted(bad - set(allowed))
    assert not unexpected, "imports against the layers (docs/architecture.md):\n" + "\n".join(
        f"{a}:{lines[a, b]} imports {b}" for a, b in unexpected)
    stale = sorted(set(allowed) - bad)
    assert not stale, f"documented exceptions that no longer occur (remove them): {stale}"
    assert all(len(why) >= 20 for why in allowed.values()), "each exception needs its reason"


def test_aliases_are_thin_and_unused_inside_the_package(graph: list[Edge]) -> None:
    mods = modules(SRC)
    for alias, target in ALIASES.items():
        text = mods[alias].read_text(encoding="utf-8")
        assert target in text and len(text.splitlines()) <= 30, f"{alias} should only re-export {target}"
    users = sorted({(e.importer, e.imported) for e in graph if e.imported in ALIASES and e.importer not in ALIASES})
    assert not users, f"modules importing an old path instead of its new home: {users}"


def test_no_module_over_the_line_ceiling() -> None:
    found = long_modules(SRC)
    assert not found, f"modules over {MAX_MODULE_LINES} lines (split them by concept, see STYLE.md): " + \
        ", ".join(f"{name} ({n})" for name, n in sorted(found.items()))


# -- the checker itself --------------------------------------------------------------------


def test_checker_finds_upward_imports_and_circles(tmp_path: Path) -> None:
    pkg = tmp_path / "factrl"
    (pkg / "envs").mkdir(parents=True)
    (pkg / "rewards").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "envs" / "__init__.py").write_text("")
    (pkg / "rewards" / "__init__.py").write_text("")
    (pkg / "envs" / "a.py").write_text("def f():\n    from factrl.rewards.b import g\n")
    (pkg / "rewards" / "b.py").write_text("from ..envs import a\n")
    (pkg / "metrics.py").write_text("import factrl.envs.a\n")
    graph = edges(tmp_path)
    assert cycles(graph) == [["factrl.envs.a", "factrl.rewards.b"]]
    assert violations(graph) == {("factrl.envs.a", "factrl.rewards.b"), ("factrl.metrics", "factrl.envs.a")}


def test_checker_finds_long_modules(tmp_path: Path) -> None:
    pkg = tmp_path / "factrl" / "lm"
    pkg.mkdir(parents=True)
    (tmp_path / "factrl" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("x = 1\n" * 451)
    (pkg / "short.py").write_text("x = 1\n" * 450)
    assert long_modules(tmp_path) == {"factrl.lm": 451}


def test_exceptions_table_is_read() -> None:
    text = "# x\n## Exceptions\n\n| importer | imported | why |\n|---|---|---|\n" \
           "| `factrl.a` | `factrl.b.c` | because the reason is long enough |\n## Next\n| `factrl.x` | `factrl.y` | z |\n"
    assert documented_exceptions(text) == {("factrl.a", "factrl.b.c"): "because the reason is long enough"}
