"""``factrl train factworld``: its ``--from`` help names every bundled recipe."""

import typer

from factrl.cli import _load_commands, app
from factrl.recipes.named import list_named


def test_from_help_lists_every_named_recipe() -> None:
    _load_commands()
    cmd = typer.main.get_command(app).commands["train"].commands["factworld"]
    text = next(p.help for p in cmd.params if p.name == "source")
    assert len(list_named()) >= 9
    for name in list_named():
        assert name in text, name
