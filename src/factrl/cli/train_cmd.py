"""``factrl train grpo|presets``: GRPO on TRL with multi-turn factrl environments."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from factrl.cli.app import train_app


def _parse_sets(sets: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in sets:
        if "=" not in item:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--set")
        key, raw = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


@train_app.command("presets")
def presets() -> None:
    """List the bundled presets with the paper section each one follows."""
    from factrl.train.config import list_presets, load_run_config

    for name in list_presets():
        cfg = load_run_config(name)
        tag = " [scaled down for CPU]" if cfg.preset.scaled_down else ""
        typer.echo(f"{name:24s} {cfg.preset.paper}{tag}")


@train_app.command("grpo")
def grpo(
    config: str = typer.Option(..., "--config", help="A TOML file or a preset name (factrl train presets)."),
    set_: list[str] = typer.Option([], "--set", help="Override a setting: --set grpo.max_steps=10 (repeatable)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default: the config's output_dir)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in the output dir."),
    eval_held_out: bool = typer.Option(
        False, "--eval-held-out", help="Evaluate the held-out claims before and after training (greedy)."
    ),
) -> None:
    """Train an agent with GRPO; writes checkpoints, metrics.jsonl, curves.png and final/."""
    from factrl.train.config import load_run_config
    from factrl.train.grpo import train_grpo

    overrides = _parse_sets(set_)
    if out is not None:
        overrides["output_dir"] = str(out)
    try:
        cfg = load_run_config(config, overrides)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
    if eval_held_out:
        from factrl.train.learning import evaluate_held_out

        evaluate_held_out(cfg, cfg.model.id, Path(cfg.output_dir) / "eval_before")
    final = train_grpo(cfg, resume=resume)
    if eval_held_out:
        from factrl.train.learning import evaluate_held_out, learning_table

        evaluate_held_out(cfg, str(final), Path(cfg.output_dir) / "eval_after")
        table = learning_table(Path(cfg.output_dir))
        (Path(cfg.output_dir) / "learning.md").write_text(table)
        typer.echo(table)
