"""``factrl train verifier`` and ``factrl export verifier``: the fact-checking cross-encoder."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli.app import train_app
from factrl.cli.export_cmd import export_app


def _sources(value: str) -> tuple[str, ...]:
    from factrl.verifier.pairs import PAIR_SOURCES

    names = tuple(s.strip() for s in value.split(",") if s.strip())
    unknown = [s for s in names if s not in PAIR_SOURCES]
    if not names or unknown:
        raise typer.BadParameter(f"unknown source(s) {unknown or value!r}; available: {', '.join(PAIR_SOURCES.names())}",
                                 param_hint="--sources")
    return names


@train_app.command("verifier")
def train_verifier_cmd(
    out: Path = typer.Option(Path("runs/verifier"), "--out", help="Run folder (checkpoint, progress, final/)."),
    data_dir: Path = typer.Option(Path("../shared/data"), "--data-dir", help="The benchmark data folder."),
    sources: str = typer.Option("scifact,climate_fever,feverous_s,averitec,veri_r1_offline", "--sources",
                                help="Pair sources, comma-separated."),
    epochs: float = typer.Option(1.0, "--epochs"),
    batch_size: int = typer.Option(16, "--batch-size"),
    learning_rate: float = typer.Option(1e-3, "--lr"),
    lora_r: int = typer.Option(16, "--lora-r"),
    max_length: int = typer.Option(128, "--max-length", help="Tokens per (claim, evidence) pair."),
    layers: int = typer.Option(None, "--layers", help="Keep only the base encoder's first N blocks: a shallower, "
                               "faster verifier (with --init-from, the deeper delta's first N blocks start it)."),
    held_out: float = typer.Option(0.2, "--held-out", help="Share of claim groups never trained on."),
    validation: float = typer.Option(0.1, "--validation", help="Share of claim groups for calibration."),
    seed: int = typer.Option(0, "--seed"),
    base: str = typer.Option("all-MiniLM-L6-v2", "--base", help="The encoder to start from: the embedded "
                             "MiniLM, or a local transformers folder."),
    max_train_pairs: int = typer.Option(None, "--max-train-pairs", help="Train on a seeded subset (smoke runs)."),
    repeat: list[str] = typer.Option([], "--repeat", help="SOURCE=N: that source's training pairs N times an "
                                     "epoch (repeatable), e.g. scifact=2."),
    init_from: Path = typer.Option(None, "--init-from", help="Start from a trained verifier (RUN/final): "
                                   "continued training."),
    teacher: str = typer.Option(None, "--teacher", help="Distil from a trained verifier (factrl-verifier, an asset "
                                "or RUN/final): the loss also matches its softened logits."),
    distill_weight: float = typer.Option(0.5, "--distill-weight", help="The teacher's share of the loss (0-1)."),
    distill_temperature: float = typer.Option(2.0, "--distill-temperature", help="Softening of both logits."),
    max_minutes: float = typer.Option(None, "--max-minutes", help="Stop (with a checkpoint) after this long; "
                                      "run the same command again to resume."),
    save_minutes: float = typer.Option(5.0, "--save-minutes"),
    threads: int = typer.Option(1, "--threads", help="torch threads (keep 1 on a shared machine)."),
    finish: bool = typer.Option(False, "--finish", help="Take no more steps: calibrate the checkpoint's delta and "
                                "write OUT/final/ now (when the planned steps will not fit the time there is)."),
) -> None:
    """Train the verifier cross-encoder from the embedded MiniLM (resumable, time-budgeted);
    when done, calibrate on the validation split and write OUT/final/."""
    from factrl.verifier.train import VerifierTrainConfig, train_verifier

    try:
        factors = {k.strip(): int(v) for k, _, v in (r.partition("=") for r in repeat)}
    except ValueError:
        raise typer.BadParameter(f"--repeat takes SOURCE=N, got {repeat}", param_hint="--repeat") from None
    try:
        config = VerifierTrainConfig(repeat=factors, init_from=str(init_from) if init_from else None,
            data_dir=str(data_dir), sources=_sources(sources), epochs=epochs, batch_size=batch_size,
            learning_rate=learning_rate, lora_r=lora_r, lora_alpha=2.0 * lora_r, max_length=max_length,
            layers=layers, held_out=held_out, validation=validation, seed=seed, base=base, max_train_pairs=max_train_pairs,
            max_minutes=max_minutes, save_minutes=save_minutes, threads=threads, teacher=teacher,
            distill_weight=distill_weight, distill_temperature=distill_temperature)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    from factrl.verifier.asset import VerifierAssetError

    try:
        outcome = train_verifier(config, out, log=lambda s: typer.echo(s, err=True), finish=finish)
    except (ValueError, FileNotFoundError, VerifierAssetError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"{outcome.status}: step {outcome.step}/{outcome.total_steps}"
               + (f", {outcome.final_dir}" if outcome.final_dir else ""))


@export_app.command("verifier")
def export_verifier_cmd(
    run: Path = typer.Option(Path("runs/verifier"), "--run", help="The training run (its final/ is shipped)."),
    out: Path = typer.Option(None, "--out", help="Asset folder to write (default: the package's assets/verifier)."),
    data_dir: Path = typer.Option(None, "--data-dir", help="The benchmark data folder (default: the run's)."),
    command: list[str] = typer.Option([], "--command", help="A command that made the run, for the manifest "
                                      "(repeatable)."),
) -> None:
    """Evaluate a trained verifier on its held-out split and write it as the packaged
    factrl-verifier (delta + manifest with the held-out metrics and checksums)."""
    import json
    import shlex
    from dataclasses import fields

    from factrl.verifier.asset import VerifierAssetError, load_verifier, ship_verifier, verifier_asset_dir
    from factrl.verifier.evaluate import evaluate_pairs
    from factrl.verifier.pairs import build_pairs
    from factrl.verifier.train import FINAL_DIR, INFO_FILE, VerifierTrainConfig

    final = run / FINAL_DIR
    if not (final / INFO_FILE).is_file():
        raise typer.BadParameter(f"{final} has no {INFO_FILE}: finish training first (factrl train verifier)",
                                 param_hint="--run")
    info = json.loads((final / INFO_FILE).read_text())
    known = {f.name for f in fields(VerifierTrainConfig)}
    config = VerifierTrainConfig.from_dict({k: v for k, v in info["training"].items() if k in known})
    pairs = build_pairs(data_dir or config.data_dir, config.sources, config.fractions,
                        log=lambda s: typer.echo(s, err=True))
    held = [p for p in pairs if p.split == "held_out"]
    try:
        verifier = load_verifier(str(final), precision="fp32")  # the reference figures
    except VerifierAssetError as exc:
        raise typer.BadParameter(str(exc), param_hint="--run") from None
    report = evaluate_pairs(verifier, held)
    (run / "held_out.json").write_text(json.dumps(report, indent=2) + "\n")
    this = " ".join(["factrl export verifier --run", shlex.quote(str(run)),
                     *(["--out", shlex.quote(str(out))] if out else []),
                     *(["--data-dir", shlex.quote(str(data_dir))] if data_dir else [])])
    manifest = ship_verifier(final, out or verifier_asset_dir(), held_out=report, commands=[*command, this])
    for source, block in report["sources"].items():
        for subset, m in block.items():
            typer.echo(f"{source:16s} {subset:9s} n={m['n']:5d} macro-F1 {m['macro_f1']:.3f} "
                       f"accuracy {m['accuracy']:.3f} contradiction AUC {m['contradiction_roc_auc']}")
    typer.echo(f"wrote {out or verifier_asset_dir()} ({manifest['bytes']:,} bytes, sha256 {manifest['sha256'][:12]})")
