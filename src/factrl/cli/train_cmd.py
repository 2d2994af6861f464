"""``factrl train grpo|presets|ffrr|...``: GRPO on TRL with multi-turn factrl environments; FFRR retriever training."""

from __future__ import annotations

from pathlib import Path

import typer

from factrl.cli._common import (AGENT_HELP, CONTEXT_SENTENCES_HELP, DEVICE_CHOICES, DEVICE_HELP, DTYPE_CHOICES,
                                DTYPE_HELP, MODE_HELP, PARAM_HELP)
from factrl.cli.app import train_app
from factrl.envs.base import DEFAULT_AGENT

TRAIN_DEVICE_HELP = (f"Where it trains (TRL: the first visible GPU) and its frozen models run: {DEVICE_CHOICES}. "
                     "Sets model.device.")
TRAIN_DTYPE_HELP = (f"Mixed precision (float32 master weights) and the frozen models' weights: {DTYPE_CHOICES} "
                    "(float16: GPU only). Sets model.dtype.")


def _parse_sets(sets: list[str]) -> dict[str, object]:
    from factrl.train.config import parse_overrides

    try:
        return parse_overrides(sets)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--set") from None


def _device_sets(device: str | None, dtype: str | None, prefix: str = "model.") -> dict[str, object]:
    """``--device``/``--dtype`` as config overrides (``model.device``/``model.dtype``)."""
    return {f"{prefix}{k}": v for k, v in (("device", device), ("dtype", dtype)) if v is not None}


def _check_precision(device: str | None, dtype: str | None, bf16: bool = False, *, trainer: str = "trl",
                     hint: str = "--device") -> tuple[str, str]:
    """The resolved ``(device, dtype)`` a run trains in; one this machine cannot honour is
    a usage error before any data or model loads."""
    from factrl.train.config import training_precision

    try:
        return training_precision(device, dtype, bf16, trainer=trainer)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None


def _run_config(config: str, sets: list[str], out: Path | None, extra: dict[str, object] | None = None,  # noqa: ANN202
                *, trains: bool = True):
    """The run config of ``--config``/``--set``/``--out`` (and ``extra`` overrides); a bad
    one, or (``trains``) a device or dtype this machine cannot train in, is a usage error
    naming it."""
    from factrl.train.config import load_run_config

    overrides = _parse_sets(sets)
    if out is not None:
        overrides["output_dir"] = str(out)
    overrides.update(extra or {})
    try:
        cfg = load_run_config(config, overrides)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
    if trains:
        _check_precision(cfg.model.device, cfg.model.dtype, cfg.grpo.bf16,
                         hint="--device/--dtype (model.device/dtype)")
    return cfg


@train_app.command("presets")
def presets() -> None:
    """List the bundled presets with the paper section each one follows."""
    from factrl.train.config import list_presets, load_run_config

    for name in list_presets():
        cfg = load_run_config(name)
        tag = " [scaled down for CPU]" if cfg.preset.scaled_down else ""
        typer.echo(f"{name:24s} {cfg.preset.paper}{tag}")
    from factrl.train.ffrr.config import list_ffrr_presets, load_ffrr_config

    for name in list_ffrr_presets():  # factrl train ffrr --config NAME
        cfg = load_ffrr_config(name)
        tag = " [scaled down for CPU]" if cfg.preset.scaled_down else ""
        typer.echo(f"{name:24s} {cfg.preset.paper}{tag} (train ffrr)")


@train_app.command("grpo")
def grpo(
    config: str = typer.Option(..., "--config", help="A TOML file or a preset name (factrl train presets)."),
    set_: list[str] = typer.Option([], "--set", help="Override a setting: --set grpo.max_steps=10 (repeatable)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default: the config's output_dir)."),
    agent: str = typer.Option(None, "--agent", help="The agent to train (default: the config's env.name)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in the output dir."),
    eval_held_out: bool = typer.Option(
        False, "--eval-held-out", help="Evaluate the held-out claims before and after training (greedy)."
    ),
    device: str = typer.Option(None, "--device", help=TRAIN_DEVICE_HELP, show_default="auto"),
    dtype: str = typer.Option(None, "--dtype", help=TRAIN_DTYPE_HELP, show_default="auto"),
) -> None:
    """Train an agent with GRPO; writes checkpoints, metrics.jsonl, curves.png and final/."""
    from factrl.train.grpo import train_grpo

    cfg = _run_config(config, set_, out, {**({"env.name": agent} if agent is not None else {}),
                                          **_device_sets(device, dtype)})
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


@train_app.command("split")
def split(
    config: str = typer.Option(..., "--config", help="A TOML file or a preset name (factrl train presets)."),
    set_: list[str] = typer.Option([], "--set", help="Override a setting: --set data.held_out_fraction=0.2."),
    out: Path = typer.Option(None, "--out", help="Run directory (default: the config's output_dir)."),
) -> None:
    """Write a run's train / held-out split (train_ids.txt, held_out_ids.txt) without
    training, so a warm-up can be taught on the training part only (train teach --ids);
    a later train grpo in the same directory reuses it."""
    from factrl.datasets.prepare import HELD_OUT_IDS, TRAIN_IDS, prepare_splits

    cfg = _run_config(config, set_, out, trains=False)
    run_dir = Path(cfg.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        train, held_out = prepare_splits(cfg.data, run_dir)
    except (ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{len(train)} train → {run_dir / TRAIN_IDS}\n{len(held_out)} held out → {run_dir / HELD_OUT_IDS}")


@train_app.command("sft")
def sft(
    trajectories: Path = typer.Option(..., "--trajectories", help="trajectories.jsonl of a teacher (factrl eval)."),
    model: str = typer.Option("smollm2", "--model", help="Student model: 'smollm2', a path or a hub id."),
    out: Path = typer.Option(..., "--out", help="Output directory (final model in OUT/final)."),
    learning_rate: float = typer.Option(1e-5),
    epochs: float = typer.Option(2.0),
    batch_size: int = typer.Option(4),
    lora: bool = typer.Option(False, help="Train LoRA adapters (merged into final/)."),
    max_length: int = typer.Option(2048, "--max-length", min=16, help="Longer trajectories are skipped (and counted)."),
    gradient_checkpointing: bool = typer.Option(
        True, "--gradient-checkpointing/--no-gradient-checkpointing",
        help="Recompute activations in backward: less memory, one more forward (off is faster on small models)."),
    decision_weight: float | None = typer.Option(
        None, "--decision-weight", min=1.0,
        help="Decision-weighted LoRA SFT: the tokens where an answer decides (first token of <think>, the "
             "judgement verb, the label's first token) weigh this much; a resumable plain loop, faster on CPU "
             "(factrl.train.weighted_sft)."),
    tokens_per_batch: int = typer.Option(4096, "--tokens-per-batch", min=1,
                                         help="With --decision-weight: padded tokens per step."),
    init_adapter: Path | None = typer.Option(
        None, "--init-adapter", help="With --decision-weight: continue this LoRA adapter (e.g. the shipped agent's)."),
    device: str = typer.Option(None, "--device", show_default="auto",
                               help=f"Where it trains: {DEVICE_CHOICES} (without --decision-weight, TRL trains "
                                    "on the first visible GPU)."),
    dtype: str = typer.Option(None, "--dtype", show_default="auto",
                              help=f"Mixed precision, float32 master weights: {DTYPE_CHOICES} (float16: GPU only)."),
) -> None:
    """SFT baseline (Veri-R1 App. H) on the teacher's fully correct trajectories."""
    from factrl.train.sft import SFTSettings, train_sft
    from factrl.train.weighted_sft import WeightedSFTSettings, train_weighted_sft_on

    if (init_adapter is not None) and decision_weight is None:
        typer.echo("error: --init-adapter needs --decision-weight", err=True)
        raise typer.Exit(2)
    device, dtype = _check_precision(device, dtype, trainer="plain" if decision_weight is not None else "trl")
    settings = SFTSettings(learning_rate=learning_rate, epochs=epochs, batch_size=batch_size, lora=lora,
                           max_length=max_length, gradient_checkpointing=gradient_checkpointing,
                           device=device, dtype=dtype)
    try:
        if decision_weight is not None:
            final = train_weighted_sft_on(trajectories, model, out, WeightedSFTSettings(
                learning_rate=learning_rate, epochs=epochs, tokens_per_batch=tokens_per_batch,
                max_length=max_length, decision_weight=decision_weight,
                init_adapter=str(init_adapter) if init_adapter else None, device=device, dtype=dtype))
        else:
            final = train_sft(trajectories, model, out, settings)
    except (ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"saved {final}")


@train_app.command("filter")
def filter_(
    dataset: str = typer.Option(..., "--dataset"),
    data_dir: Path = typer.Option(..., "--data-dir"),
    split: str = typer.Option("train", "--split"),
    index: Path = typer.Option(None, "--index", help="Index for the documents' context sentences."),
    model: str = typer.Option("smollm2", "--model", help="The judge model (the paper used GPT-4o)."),
    out: Path = typer.Option(..., "--out", help="Run directory: trajectories, kept.jsonl, report."),
    limit: int = typer.Option(None, "--limit"),
    batch_size: int = typer.Option(None, "--batch-size", min=1, show_default="16 on CPU, 256 on CUDA",
                                   help="Episodes generated together."),
    agent: str = typer.Option(DEFAULT_AGENT, "--agent", help=AGENT_HELP + " Veri-R1 runs offline unless "
                              "--param mode=online."),
    param: list[str] = typer.Option([], "--param", help=PARAM_HELP),
    context_sentences: int = typer.Option(16, "--context-sentences", min=1, help=CONTEXT_SENTENCES_HELP),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP, show_default="auto"),
    dtype: str = typer.Option(None, "--dtype", help=DTYPE_HELP, show_default="auto"),
) -> None:
    """Data filtering (Veri-R1 App. E): keep the claims MODEL solves fully offline."""
    from factrl.cli._common import (agent_spec, build_run, device_options, episode_batch_sizes, load_claims,
                                    model_loading, runtime_info)
    from factrl.components import RunSpec
    from factrl.envs import POLICY
    from factrl.evaluate import evaluate
    from factrl.rollout import RolloutConfig
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories
    from factrl.teachers import teacher_env_defaults
    from factrl.train.filtering import kept_claims, write_claims_jsonl

    on_device = device_options(device, dtype, [model])
    batch_size, lm_batch = episode_batch_sizes(batch_size, on_device.get("device", "cpu"))
    claims = load_claims(dataset, data_dir, split, limit=limit)
    # offline unless told otherwise: the parameters the agent's teacher collects data with
    run = build_run(RunSpec(agent=agent_spec(agent, param, defaults=teacher_env_defaults(agent)),
                            index=str(index) if index is not None else None, context_sentences=context_sentences,
                            models={POLICY: model}, loading=model_loading(on_device, max_batch_size=lm_batch),
                            rollout=RolloutConfig(temperature=0.0, batch_size=batch_size)))
    lm, spec = run.policy, run.spec.agent
    evaluate(claims, run.make_env, lm, out,
             rollout=run.spec.rollout,
             run_info={"dataset": dataset, "split": split, "model": model, "purpose": "filter",
                       "agent": spec.model_dump(mode="json"), "batch_size": batch_size, **runtime_info(lm)})
    kept = kept_claims(claims, read_trajectories(out / TRAJ_FILE))
    write_claims_jsonl(kept, out / "kept.jsonl")
    typer.echo(f"kept {len(kept)} of {len(claims)} claims ({len(kept) / max(1, len(claims)):.0%}) → {out / 'kept.jsonl'}")


@train_app.command("teach")
def teach(
    dataset: str = typer.Option(..., "--dataset"),
    data_dir: Path = typer.Option(..., "--data-dir"),
    split: str = typer.Option("train", "--split"),
    index: Path = typer.Option(None, "--index", help="Index: search (online) or context sentences (offline)."),
    agent: str = typer.Option(DEFAULT_AGENT, "--agent", help=AGENT_HELP),
    param: list[str] = typer.Option([], "--param", help=PARAM_HELP),
    mode: str = typer.Option(None, "--mode", help=MODE_HELP),
    ids: Path = typer.Option(None, "--ids", help="Only the claims whose ids are listed (one per line)."),
    limit: int = typer.Option(None, "--limit"),
    out: Path = typer.Option(..., "--out", help="Run directory for trajectories.jsonl."),
    context_sentences: int = typer.Option(16, "--context-sentences", min=1, help=CONTEXT_SENTENCES_HELP),
) -> None:
    """Write protocol-perfect trajectories with the agent's rule-based teacher (for SFT): the
    template teacher for veri_r1 (offline unless --param mode=online), the gold-question
    teacher for profact, the notes-restating one for rar, the hop-by-hop one for haris (both
    agents: questions, searches, reports)."""
    from factrl.cli._common import agent_spec, build_run, load_claims
    from factrl.components import RunSpec
    from factrl.evaluate import evaluate
    from factrl.registry import RegistryError
    from factrl.rollout import RolloutConfig
    from factrl.teachers import make_teacher, teacher_env_defaults

    claims = load_claims(dataset, data_dir, split, balanced=True, limit=limit, ids=ids)
    # the teacher's own parameters unless told otherwise (Veri-R1's template: offline)
    run = build_run(RunSpec(agent=agent_spec(agent, param, mode=mode, defaults=teacher_env_defaults(agent)),
                            index=str(index) if index is not None else None, context_sentences=context_sentences,
                            load_policy=False, rollout=RolloutConfig(temperature=0.0, batch_size=64, max_new_tokens=4096)))
    spec, make_env = run.spec.agent, run.make_env
    try:
        teacher = make_teacher(spec.name, claims, spec.params)
    except RegistryError as exc:
        raise typer.BadParameter(str(exc), param_hint="--agent") from None
    except ValueError as exc:  # claims the teacher cannot play (e.g. HARIS on a CONFLICTING label)
        raise typer.BadParameter(str(exc), param_hint="--dataset") from None
    evaluate(claims, make_env, teacher, out,
             rollout=run.spec.rollout,
             run_info={"dataset": dataset, "split": split, "agent": spec.model_dump(mode="json"),
                       "model": teacher.name})
    if spec.name == "haris":  # the summary line above is three-way; HARIS answers Support / Refute
        from factrl.metrics.haris_eval import write_haris_metrics
        from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

        two_way = write_haris_metrics(out, read_trajectories(out / TRAJ_FILE), lms={}, reward=None)
        typer.echo(f"two-way accuracy (HARIS's scale: NOT ENOUGH INFO gold read as Refute) {two_way['accuracy']:.3f}, "
                   f"unanswered {two_way['unanswered']}")
    typer.echo(f"wrote {out / 'trajectories.jsonl'}")


@train_app.command("haris")
def haris(
    config: str = typer.Option(..., "--config", help="A TOML file or a preset (haris, haris_cpu)."),
    set_: list[str] = typer.Option([], "--set", help="Override a setting: --set haris.rounds=2 (repeatable)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default: the config's output_dir)."),
    resume: bool = typer.Option(False, "--resume", help="Continue: finished stages are skipped, a GRPO stage "
                                "resumes from its latest checkpoint."),
    stop_after: str = typer.Option(None, "--stop-after", help="End after this stage (e.g. foundation/searcher)."),
    eval_held_out: bool = typer.Option(
        False, "--eval-held-out", help="Evaluate the held-out claims before and after training (greedy)."
    ),
    device: str = typer.Option(None, "--device", help=TRAIN_DEVICE_HELP, show_default="auto"),
    dtype: str = typer.Option(None, "--dtype", help=TRAIN_DTYPE_HELP, show_default="auto"),
) -> None:
    """HARIS coordinated training (Algorithm 1): foundation, then N alternating rounds of
    search-agent and reasoning-agent GRPO; writes one directory per stage and haris_state.json."""
    from factrl.train.haris import train_haris

    cfg = _run_config(config, set_, out, _device_sets(device, dtype))
    if cfg.env.name != "haris":
        raise typer.BadParameter(f"env.name must be 'haris', got {cfg.env.name!r}", param_hint="--config")
    run_dir = Path(cfg.output_dir)
    if eval_held_out and not (run_dir / "eval_before" / "metrics.json").exists():
        from factrl.train.learning import evaluate_held_out

        searcher = cfg.haris.searcher_model or cfg.model.id
        evaluate_held_out(cfg, cfg.model.id, run_dir / "eval_before", lms={"searcher": searcher})
    try:
        state = train_haris(cfg, resume=resume, stop_after=stop_after)
    except (ValueError, FileExistsError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"reasoner {state['reasoner']}\nsearcher {state['searcher']}")
    if eval_held_out and len(state["done"]) == 3 * (cfg.haris.rounds + 1):
        from factrl.train.learning import evaluate_held_out, learning_table

        evaluate_held_out(cfg, state["reasoner"], run_dir / "eval_after", lms={"searcher": state["searcher"]})
        table = learning_table(run_dir)
        (run_dir / "learning.md").write_text(table)
        typer.echo(table)


@train_app.command("ffrr")
def ffrr(
    config: str = typer.Option(..., "--config", help="A TOML file or an FFRR preset (ffrr, ffrr_cpu)."),
    set_: list[str] = typer.Option([], "--set", help="Override a setting: --set ffrr.method=replug (repeatable)."),
    out: Path = typer.Option(None, "--out", help="Output directory (default: the config's output_dir)."),
    eval_held_out: bool = typer.Option(
        True, "--eval-held-out/--no-eval-held-out",
        help="Evaluate after training: eval.split of the dataset (the paper's test split), else the held-out claims."),
    device: str = typer.Option(None, "--device", show_default="auto",
                               help=f"Where the LM scorer and the encoder run: {DEVICE_CHOICES}. Sets device."),
    dtype: str = typer.Option(None, "--dtype", show_default="auto",
                              help=f"The LM scorer's weights (the encoder trains in float32): {DTYPE_CHOICES}. "
                                   "Sets dtype."),
) -> None:
    """Train the dense retriever from the LM's label scores (FFRR; REPLUG and frozen for
    comparison); writes metrics.jsonl, final/ (a sentence-transformers model) and eval.json."""
    import json

    from factrl.train.ffrr.config import load_ffrr_config
    from factrl.train.ffrr.trainer import train_ffrr

    overrides = _parse_sets(set_)
    if out is not None:
        overrides["output_dir"] = str(out)
    overrides.update(_device_sets(device, dtype, prefix=""))
    try:
        cfg = load_ffrr_config(config, overrides)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
    try:
        cfg.runtime()
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--device/--dtype") from None
    try:
        final = train_ffrr(cfg)
    except (ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"saved {final} (re-index with: factrl index build --model {final} ...)")
    if eval_held_out and cfg.eval.held_out:
        from factrl.train.ffrr.evaluate import evaluate_retriever, evaluation_claims

        try:
            name, claims = evaluation_claims(cfg)
        except (ValueError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        result = evaluate_retriever(final, cfg, claims, questions=_held_out_questions(cfg, claims, name))
        result["split"] = name
        (Path(cfg.output_dir) / "eval.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        typer.echo(json.dumps(result, indent=2))


def _held_out_questions(cfg, claims, name):  # noqa: ANN001, ANN202 - CLI glue
    if cfg.ffrr.level == "d":
        return None
    from factrl.lm.loader import load_lm
    from factrl.train.ffrr.questions import decompose_claims

    device, dtype = cfg.runtime()
    lm = load_lm(cfg.questions_lm or cfg.scorer.model, device=device, dtype=dtype)
    return decompose_claims(claims, lm, cache=Path(cfg.output_dir) / f"questions_{name}.jsonl",
                            max_questions=cfg.ffrr.max_questions).questions
