"""``factrl export``: claims in other frameworks' training formats (verl); a fine-tuned model as a LoRA adapter."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli._common import AGENT_HELP, MODE_HELP, PARAM_HELP
from factrl.cli.app import app
from factrl.envs.base import DEFAULT_AGENT

export_app = typer.Typer(no_args_is_help=True, help="Export training data for other frameworks (verl) and trained models as LoRA adapters.")
app.add_typer(export_app, name="export")


@export_app.command("verl")
def export_verl(
    dataset: str = typer.Option(..., "--dataset", help="Dataset format, e.g. scifact or jsonl."),
    data_dir: Path = typer.Option(..., "--data-dir", help="Dataset folder or file (see docs/formats.md)."),
    split: str = typer.Option("train", "--split"),
    out: Path = typer.Option(..., "--out", help="Parquet file to write (FILE.parquet)."),
    agent: str = typer.Option(DEFAULT_AGENT, "--agent", help=AGENT_HELP),
    param: list[str] = typer.Option([], "--param", help=PARAM_HELP),
    mode: str = typer.Option(None, "--mode", help=MODE_HELP),
    limit: int = typer.Option(None, "--limit", help="Only the first N claims (after --balanced)."),
    balanced: bool = typer.Option(False, help="Interleave labels so any --limit is class-balanced."),
    index: Path = typer.Option(
        None, "--index", help="Index whose documents give the offline prompts' context around the gold evidence."
    ),
    data_source: str = typer.Option(None, "--data-source", help="verl's data_source column (default: the dataset)."),
    max_searches: int = typer.Option(None, "--max-searches", help="Veri-R1: the search budget written into the online prompt (shorthand for --param max_searches=N)."),
    agent_name: str = typer.Option(
        None, "--agent-name", help="Add verl's agent_name column (e.g. factrl_env) to pick the agent loop per row."
    ),
    skip_bad_rows: bool = typer.Option(False, help="Skip and count malformed dataset rows and unusable claims."),
) -> None:
    """Write a dataset split as a verl parquet with the prompts factrl's environment builds."""
    if out.suffix != ".parquet":
        raise typer.BadParameter(f"{out} does not end in .parquet", param_hint="--out")
    from factrl.cli._common import build_agent, load_claims, offline_context
    from factrl.envs import EnvDeps
    from factrl.train.verl.export import VerlDataError, export_verl_parquet

    if max_searches is not None:
        param = [*param, f"max_searches={max_searches}"]
    idx = None
    if index is not None:
        from factrl.retrieval.index import load_index

        idx = load_index(index)
    context = offline_context(idx)
    spec, make_env = build_agent(agent, param, mode=mode, index=EnvDeps.offline_only(context).retriever)
    claims = load_claims(dataset, data_dir, split, skip_bad_rows=skip_bad_rows, balanced=balanced, limit=limit)
    try:
        result = export_verl_parquet(
            claims,
            out,
            env=spec,
            split=split,
            data_source=data_source or dataset,
            context=context,
            agent_name=agent_name,
            skip_invalid=skip_bad_rows,
        )
    except VerlDataError as exc:
        typer.echo(f"error: {exc}", err=True)
        if not skip_bad_rows:
            typer.echo("(pass --skip-bad-rows to skip such claims and count them)", err=True)
        raise typer.Exit(1) from None
    for claim_id, reason in result.skipped[:5]:
        typer.echo(f"skipped claim {claim_id}: {reason}", err=True)
    if result.skipped:
        typer.echo(f"skipped {len(result.skipped)} claims", err=True)
    typer.echo(f"wrote {result.rows} rows ({make_env().name}, split {split}) to {result.path}")


@export_app.command("adapter")
def export_adapter_cmd(
    model: Path = typer.Option(..., "--model", help="A fine-tuned copy of the base model (save_pretrained folder)."),
    out: Path = typer.Option(..., "--out", help="Folder for adapter_model.safetensors, adapter_config.json, manifest.json."),
    base: str = typer.Option("smollm2", "--base", help="The base model it was tuned from ('smollm2', a path or a hub id)."),
    rank: int = typer.Option(16, "--rank", min=1, help="LoRA rank (exact when the tuning was LoRA of rank <= this)."),
    dtype: str = typer.Option("bfloat16", "--dtype", help="Stored dtype: bfloat16, float16 or float32 "
                              "(the weight differences and their SVDs are float32 whatever it says)."),
    info: Path = typer.Option(None, "--info", help="A JSON object merged into the manifest (training commands, data, metrics)."),
    device: str = typer.Option(None, "--device", show_default="auto",
                               help="Where the SVDs run: auto (CUDA when available, else CPU), cpu, cuda or cuda:N."),
) -> None:
    """Write MODEL - BASE as one LoRA adapter (PEFT format) with a manifest and checksum."""
    import json

    from factrl.lm.agent import MANIFEST_FILE, export_adapter
    from factrl.lm.device import DeviceError, resolve_device
    from factrl.lm.loader import LMLoadError, resolve_model_path

    if dtype not in ("bfloat16", "float16", "float32"):
        raise typer.BadParameter(f"unknown dtype {dtype!r}", param_hint="--dtype")
    try:
        device = resolve_device(device)
    except DeviceError as exc:
        raise typer.BadParameter(str(exc), param_hint="--device") from None
    try:
        base_dir = resolve_model_path(base)
    except LMLoadError as exc:
        raise typer.BadParameter(str(exc), param_hint="--base") from None
    extra = json.loads(info.read_text()) if info is not None else {}
    if not isinstance(extra, dict):
        raise typer.BadParameter(f"{info} does not hold a JSON object", param_hint="--info")
    report = export_adapter(model, Path(base_dir), out, rank=rank, dtype=dtype, device=device)
    manifest = {**extra, "base_model": base, "adapter": report, "sha256": report["sha256"]}
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    typer.echo(f"wrote {out}: {report['layers']} layers, rank {rank}, {report['bytes'] / 1e6:.2f} MB, "
               f"{report['energy_kept']:.4f} of the weight change kept")
    if report["not_carried"]:
        typer.echo(f"warning: {len(report['not_carried'])} changed parameters are outside the adapter's layers "
                   f"and are not carried (largest change {max(report['not_carried'].values()):.3g})", err=True)
