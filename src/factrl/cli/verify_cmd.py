"""``factrl verify``: verify one claim against an index with an LM agent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from factrl.cli._common import (AGENT_HELP, BASE_URL_HELP, DEVICE_HELP, DTYPE_HELP, LM_CACHE_HELP, LM_TIMEOUT_HELP,
                                MODE_HELP, MODEL_HELP, NO_REPEAT_NGRAM_HELP, PARAM_HELP, ROLE_MODEL_HELP)
from factrl.cli.app import app
from factrl.envs.base import DEFAULT_AGENT


@app.command()
def verify(
    claim: str = typer.Argument(..., help="The claim to verify."),
    index: Path = typer.Option(..., "--index", help="Index directory (factrl index build)."),
    model: str = typer.Option("factrl-agent", "--model", help=MODEL_HELP),
    base_url: str = typer.Option(None, "--base-url", help=BASE_URL_HELP),
    lm_cache: Path = typer.Option(None, "--lm-cache", help=LM_CACHE_HELP),
    lm_timeout: float = typer.Option(None, "--lm-timeout", min=0.001, help=LM_TIMEOUT_HELP),
    device: str = typer.Option(None, "--device", help=DEVICE_HELP, show_default="auto"),
    dtype: str = typer.Option(None, "--dtype", help=DTYPE_HELP, show_default="auto"),
    agent: str = typer.Option(DEFAULT_AGENT, "--agent", help=AGENT_HELP),
    role_model: list[str] = typer.Option([], "--role-model", help=ROLE_MODEL_HELP),
    param: list[str] = typer.Option([], "--param", help=PARAM_HELP),
    mode: str = typer.Option(None, "--mode", help=MODE_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
    trajectory: bool = typer.Option(False, "--trajectory", help="Also show the whole episode."),
    temperature: float = typer.Option(0.0, help="0 = greedy decoding."),
    max_new_tokens: int = typer.Option(384, help="Tokens per model turn."),
    seed: int = typer.Option(0),
    no_repeat_ngram: int = typer.Option(0, "--no-repeat-ngram", min=0, help=NO_REPEAT_NGRAM_HELP),
    force_answer: bool = typer.Option(
        True, "--force-answer/--no-force-answer",
        help="When the model ends without a labelled <answer>, read a verdict from its label probabilities "
             "(printed as forced; needs a local model)."),
) -> None:
    """Search the index, reason, and print the verdict with its evidence."""
    if not claim.strip():
        raise typer.BadParameter("the claim is empty", param_hint="CLAIM")
    from factrl.cli._common import device_options, parse_role_models
    from factrl.lm.loader import is_packaged

    role_specs = parse_role_models(role_model)
    if is_packaged(model):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    on_device = device_options(device, dtype, [model, *role_specs.values()])
    from factrl.cli._common import agent_spec, build_run, lm_options, model_loading, require_repetition_guard, runtime_info
    from factrl.components import RunSpec
    from factrl.envs import POLICY
    from factrl.rollout import RolloutConfig, run_episodes
    from factrl.types import Claim

    lm_options(model, base_url, lm_cache, lm_timeout, role_model)  # openai-only options need an openai model
    spec = RunSpec(agent=agent_spec(agent, param, mode=mode), index=str(index), models={POLICY: model, **role_specs},
                   loading=model_loading(on_device, base_url=base_url, lm_cache=lm_cache, lm_timeout=lm_timeout),
                   rollout=RolloutConfig(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed,
                                         batch_size=1, no_repeat_ngram=no_repeat_ngram))
    run = build_run(spec)
    lm, idx = run.policy, run.index
    require_repetition_guard(lm, no_repeat_ngram)
    (traj,) = run_episodes(run.make_env, [Claim(id="cli", text=claim)], lm, spec.rollout, lms=run.role_lms() or None)
    if force_answer:  # only an agent that declares its forcing is forced (Veri-R1's "<answer>\nLabel:")
        from factrl.forced import answer_forcing, with_forced

        (traj,) = with_forced([traj], lm, answer_forcing(run.make_env()))
    evidence = [{"id": e, "text": idx.sentence_text(e)} for e in traj.verdict.evidence_ids]
    if json_out:
        out = {
            "claim": claim,
            "label": traj.verdict.label.value if traj.verdict.label else None,
            "evidence": evidence,
            "forced": traj.verdict.forced,
            **({"confidence": traj.meta["confidence"]} if "confidence" in traj.meta else {}),
            "format_ok": traj.verdict.format_ok,
            "format_errors": traj.verdict.format_errors,
            "searches": traj.searches,
            "error": traj.error,
            **({"runtime": runtime_info(lm)} if runtime_info(lm) else {}),
        }
        if trajectory:
            out["trajectory"] = traj.model_dump(mode="json")
        typer.echo(json.dumps(out, ensure_ascii=False, indent=2))
        return
    typer.echo(f"Claim:    {claim}")
    from factrl.forced import FORCED_NOTE

    forced_note = f" {FORCED_NOTE}" if traj.verdict.forced else ""
    confidence = f" (confidence {traj.meta['confidence']:.2f})" if "confidence" in traj.meta else ""
    typer.echo(f"Verdict:  {traj.verdict.label.value if traj.verdict.label else '(no verdict)'}{forced_note}{confidence}")
    typer.echo("Evidence:" + ("" if evidence else " (none cited)"))
    for e in evidence:
        typer.echo(f"  [[{e['id']}]] {e['text'] if e['text'] is not None else '(id not in the index)'}")
    if traj.searches:
        typer.echo("Searches: " + " | ".join(traj.searches))
    if not traj.verdict.format_ok:
        typer.echo("Format problems: " + "; ".join(traj.verdict.format_errors))
    if traj.error:
        typer.echo(f"Error: {traj.error}")
    if trajectory:
        typer.echo("\n--- trajectory ---")
        typer.echo(traj.prompt[-1].content)
        typer.echo(traj.transcript)
