"""``factrl train factworld``: the learning recipe on a generated world (factrl.recipes.factworld)."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli._common import DEVICE_CHOICES, DTYPE_CHOICES
from factrl.cli.app import train_app
from factrl.recipes.named import list_named


@train_app.command("factworld")
def factworld(
    out: Path = typer.Option(..., "--out", help="Run directory (resumes when it exists)."),
    source: str = typer.Option(None, "--from", help=f"Start from a named recipe ({', '.join(list_named())}), "
                               "a TOML file of [recipe] and [set], or a run's recipe.json; the options below override it."),
    fork_from: Path = typer.Option(None, "--fork-from", help="Copy another run's worlds, teacher episodes and "
                                   "warm-up into this new --out and go on from there, with that run's settings unless --from "
                                   "is given; only GRPO, rollout, reward and HARIS-training settings, checkpoints and "
                                   "controls may differ (a replicate with another GRPO seed); with grpo.* changes "
                                   "alone the warm-up's evaluation is reused too."),
    preset: str = typer.Option(None, "--preset", show_default="veri_r1_factworld_cpu",
                               help="GRPO run config (factrl train presets)."),
    model: str = typer.Option(None, "--model", show_default="smollm2", help="The student's starting model."),
    stage: list[str] = typer.Option([], "--stage", help="Run only these stages: worlds, teach, warmup, grpo, eval, report."),
    control: list[str] = typer.Option([], "--control", help="Also train a broken-trainer control: flip_advantage, "
                                      "invert_mask, shuffle_rewards, or the diagnostic invert_mask_no_echo "
                                      "(repeatable; benchmarks only)."),
    set_: list[str] = typer.Option([], "--set", help="Override a GRPO setting of the preset: --set grpo.max_steps=16."),
    recipe_set: list[str] = typer.Option([], "--recipe", help="Override a recipe setting: --recipe teacher_noise=0.3 "
                                         "(fields of factrl.recipes.factworld.FactworldRecipe)."),
    eval_base: bool = typer.Option(False, "--eval-base", help="Also evaluate the untrained model."),
    run: list[str] = typer.Option([], "--run", help="Train/evaluate only these GRPO runs: 'none' (the real one) or "
                                  "a --control name (repeatable), e.g. controls in a second process."),
    side_by_side: bool = typer.Option(False, "--side-by-side", help="Train and evaluate the real run and each "
                                      "control at once, each in its own process with a share of the cores (no more at "
                                      "once than the free memory holds, $FACTRL_RUN_MEMORY_GB each, default 11)."),
    device: str = typer.Option(None, "--device", show_default="auto",
                               help=f"Where every stage trains and evaluates: {DEVICE_CHOICES}."),
    dtype: str = typer.Option(None, "--dtype", show_default="auto",
                              help=f"Mixed precision (float32 master weights) and the evaluated models' weights: "
                                   f"{DTYPE_CHOICES} (float16: GPU only)."),
) -> None:
    """Does the RL teach? A world, a deliberately imperfect warm-up, GRPO (and controls),
    held-out evaluation on another world with McNemar tests against the warm-up."""
    import dataclasses

    from factrl.recipes.factworld import STAGES, FactworldRecipe, run_recipe
    from factrl.recipes.named import read_recipe_source
    from factrl.train.config import parse_overrides, training_precision

    try:  # refused before any stage runs
        training_precision(device, dtype)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--device/--dtype") from None
    on = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}

    fields = {f.name: f for f in dataclasses.fields(FactworldRecipe)}
    if fork_from is not None and source is None:  # the fork's settings: its source's, changed by the options
        source = str(fork_from / "recipe.json")
    try:
        base, base_set = read_recipe_source(source) if source else ({}, {})
        extra = parse_overrides(recipe_set)
        unknown = [k for k in extra if k not in fields]
        if unknown:
            raise ValueError(f"unknown recipe setting(s) {', '.join(unknown)}; known: {', '.join(fields)}")
        given = {k: v for k, v in (("preset", preset), ("model", model)) if v is not None}
        settings = {**base, **given, **on, **extra}
        settings["controls"] = tuple(control) if control else tuple(settings.get("controls", ()))
        settings["eval_base"] = eval_base or bool(settings.get("eval_base", False))
        recipe = FactworldRecipe(grpo_overrides={**base_set, **parse_overrides(set_)}, **settings)
        run_recipe(recipe, out, stages=tuple(stage) or STAGES, runs=tuple(run) or None, side_by_side=side_by_side,
                   fork_from=fork_from)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    report = out / "report.md"
    if report.is_file():
        typer.echo(report.read_text())
