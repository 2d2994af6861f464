"""Named factworld recipes: the measured settings of ``factrl train factworld`` runs
(docs/benchmarks.md, "Does the RL teach?"), one TOML file each, for
``factrl train factworld --from NAME``. A file holds a ``[recipe]`` table (fields of
:class:`factrl.recipes.factworld.FactworldRecipe`) and a ``[set]`` table (the GRPO
overrides of its preset, as ``--set`` gives them). A run's own ``recipe.json`` is read
the same way, so ``--from RUN/recipe.json`` repeats a recorded run.

A TOML recipe may start from another one: a top-level ``from = "NAME"`` (a bundled name,
or a TOML file, relative to the file that names it) takes that recipe's ``[recipe]`` and
``[set]`` tables, and this file's own entries replace or add to them, so a variant says
only what it changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["PACKAGE", "list_named", "read_recipe_source"]

PACKAGE = "factrl.recipes.named"


def list_named() -> list[str]:
    """The bundled recipe names."""
    from factrl.train.config import list_presets

    return list_presets(PACKAGE)


def read_recipe_source(source: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(recipe fields, GRPO overrides)`` of a bundled recipe name, a TOML file or a run's
    ``recipe.json``; a ``ValueError`` names what is wrong (an unknown table, a setting
    that is not a recipe field, a file that does not parse, a ``from`` chain that loops)."""
    return _read(source, ())


def _read(source: str | Path, chain: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    import dataclasses

    from factrl.recipes.factworld import FactworldRecipe
    from factrl.train.config import read_config_toml

    path = Path(source)
    key = f"{path.resolve()}" if path.exists() else f"recipe {source}"
    if key in chain:
        raise ValueError(f"'from' loops: {' -> '.join((*chain, key))}")
    if path.suffix == ".json":
        try:
            fields = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a readable recipe record ({exc})") from None
        if not isinstance(fields, dict):
            raise ValueError(f"{path}: a recipe record is a JSON object of recipe settings")
        overrides = fields.pop("grpo_overrides", {}) or {}
        where = str(path)
    else:
        if path.suffix != ".toml" and not path.exists() and str(source) not in list_named():
            raise ValueError(f"no recipe file or named recipe {str(source)!r}; named recipes: {', '.join(list_named())}")
        data, where = read_config_toml(source, package=PACKAGE)
        extra = sorted(set(data) - {"recipe", "set", "from"})
        if extra:
            raise ValueError(f"{where}: unknown table(s) {', '.join(extra)}; a recipe has [recipe] and [set]")
        fields, overrides = dict(data.get("recipe", {})), data.get("set", {})
        if "from" in data:
            fields, overrides = _inherit(data["from"], path, where, (*chain, key), fields, overrides)
        if isinstance(overrides, dict):  # TOML has no null: "null" unsets, as --set k=null does
            overrides = {k: None if isinstance(v, str) and v.lower() in ("null", "none") else v
                         for k, v in overrides.items()}
    known = {f.name for f in dataclasses.fields(FactworldRecipe)} - {"grpo_overrides"}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"{where}: unknown recipe setting(s) {', '.join(unknown)}")
    if not isinstance(overrides, dict):
        raise ValueError(f"{where}: the GRPO overrides must be a table of dotted keys")
    return fields, overrides


def _inherit(base: Any, path: Path, where: str, chain: tuple[str, ...], fields: dict[str, Any],
             overrides: Any) -> tuple[dict[str, Any], Any]:
    """The base recipe's tables with this file's entries laid over them."""
    if not isinstance(base, str) or not base:
        raise ValueError(f"{where}: 'from' names a recipe (a bundled name or a TOML file), got {base!r}")
    if not isinstance(overrides, dict):
        raise ValueError(f"{where}: the GRPO overrides must be a table of dotted keys")
    target: str | Path = base
    if base not in list_named():  # a file, relative to the one naming it
        target = (path.parent / base).resolve()
        if not target.is_file():
            raise ValueError(f"{where}: 'from' = {base!r} is neither a bundled recipe nor a file beside it; "
                             f"named recipes: {', '.join(list_named())}")
    base_fields, base_overrides = _read(target, chain)
    return {**base_fields, **fields}, {**base_overrides, **overrides}
