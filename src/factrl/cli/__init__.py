"""Command-line interface: ``factrl corpus|data|index|search|verify|eval|report|export|serve|train``.

Each command group lives in its own module and registers on the shared typer app;
heavy libraries are imported inside the command bodies, so ``factrl --help`` is fast.
"""

from __future__ import annotations

import importlib
import pkgutil

from factrl.cli.app import app

__all__ = ["app", "main"]


def _load_commands() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name.endswith("_cmd"):
            importlib.import_module(f"{__name__}.{mod.name}")


def main() -> None:
    _load_commands()
    app()
