"""``factrl eval``: evaluate an agent on a dataset, streaming and resumable."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from factrl.cli._common import (AGENT_HELP, BASE_URL_HELP, CONTEXT_SENTENCES_HELP, DEVICE_HELP, DTYPE_HELP,
                               LM_CACHE_HELP, LM_TIMEOUT_HELP, METRIC_PARAM_HELP, MODE_HELP, MODEL_HELP,
                               NO_REPEAT_NGRAM_HELP, PARAM_HELP, ROLE_MODEL_HELP, VERIFIER_HELP)
from factrl.cli.app import app
from factrl.envs.base import DEFAULT_AGENT


@contextmanager
def run_errors() -> Iterator[None]:
    """Problems with the run directory or its input become one ``error:`` line and exit
    status 1, not a traceback: the user can fix each of them."""
    from factrl.evaluate import AgentMetricsError, EmptyRunError, RunMismatchError, TrajectoryFileError
    from factrl.runs.lock import RunLockedError

    try:
        yield
    except (RunLockedError, TrajectoryFileError, RunMismatchError, EmptyRunError, AgentMetricsError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@app.command("eval")
@run_errors()
def eval_(
    ctx: typer.Context,
    dataset: str = typer.Option(..., "--dataset", help="Dataset format, e.g. scifact or jsonl."),
    data_dir: Path = typer.Option(..., "--data-dir", help="Dataset folder or file (see docs/formats.md)."),
    split: str = typer.Option("train", "--split"),
    index: Path = typer.Option(None, "--index", help="Index directory (needed online)."),
    out: Path = typer.Option(..., "--out", help="Run directory (created; resumed if it exists)."),
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
    reward: str = typer.Option(None, "--reward", help="Reward name (default: the agent's own)."),
    reward_param: list[str] = typer.Option([], "--reward-param", help="A reward parameter key=value (repeatable)."),
    metric_param: list[str] = typer.Option([], "--metric-param", help=METRIC_PARAM_HELP),
    limit: int = typer.Option(None, "--limit", help="Only the first N claims (after --balanced)."),
    balanced: bool = typer.Option(False, help="Interleave labels so any --limit is class-balanced."),
    temperature: float = typer.Option(0.0, help="0 = greedy decoding."),
    max_new_tokens: int = typer.Option(384, help="Tokens per model turn."),
    batch_size: int = typer.Option(
        None, "--batch-size", min=1, show_default="16 on CPU, 256 on CUDA",
        help="Episodes generated together (a local model's rows per forward pass are at least this many)."),
    seed: int = typer.Option(0),
    no_repeat_ngram: int = typer.Option(0, "--no-repeat-ngram", min=0, help=NO_REPEAT_NGRAM_HELP),
    skip_bad_rows: bool = typer.Option(False, help="Skip and count malformed dataset rows."),
    force: bool = typer.Option(False, help="Reuse a run directory made with other settings."),
    context_sentences: int = typer.Option(None, "--context-sentences", min=1, help=CONTEXT_SENTENCES_HELP),
    verifier: str = typer.Option(None, "--verifier", help=VERIFIER_HELP),
    retry_errors: bool = typer.Option(
        False, "--retry-errors",
        help="On resumption, run again every episode that ended in an error (those that ended in an LM error, "
             "e.g. a server that was down, are always run again)."),
) -> None:
    """Verify every claim, write trajectories.jsonl as it goes, then metrics.json. Exits 1
    when every episode ended in an error."""
    from factrl.cli._common import parse_role_models
    from factrl.lm.loader import is_packaged

    role_specs = parse_role_models(role_model)
    metric_params = _metric_params(agent, metric_param)
    if is_packaged(model):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from factrl.cli._common import (agent_spec, build_run, device_options, episode_batch_sizes, index_info, lm_options,
                                    model_loading, require_claims, require_repetition_guard, reward_params,
                                    runtime_info, select_claims)

    on_device = device_options(device, dtype, [model, *role_specs.values(), *([verifier] if verifier else [])])
    batch_size, lm_batch = episode_batch_sizes(batch_size, on_device.get("device", "cpu"))
    lm_options(model, base_url, lm_cache, lm_timeout, role_model)  # openai-only options need an openai model
    from factrl.components import RunSpec
    from factrl.envs import POLICY
    from factrl.evaluate import evaluate
    from factrl.rollout import RolloutConfig
    from factrl.runs.lock import run_lock

    selection = select_claims(dataset, data_dir, split, skip_bad_rows=skip_bad_rows, balanced=balanced, limit=limit)
    require_claims(selection, data_dir, split)
    claims = selection.claims
    spec = RunSpec(
        agent=agent_spec(agent, param, mode=mode), reward=reward, reward_params=reward_params(reward_param),
        index=str(index) if index is not None else None, context_sentences=context_sentences,
        models={POLICY: model, **role_specs}, reward_model=verifier, judge_model=verifier,
        loading=model_loading(on_device, max_batch_size=lm_batch, base_url=base_url, lm_cache=lm_cache,
                              lm_timeout=lm_timeout),
        rollout=RolloutConfig(temperature=temperature, max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed,
                              no_repeat_ngram=no_repeat_ngram))
    # Held until the command ends, taken before the index and model load so a second run
    # on the same --out fails at once; evaluate() re-enters it.
    ctx.with_resource(run_lock(out))
    run = build_run(spec)
    lm, idx, scorer = run.policy, run.index, run.reward
    require_repetition_guard(lm, no_repeat_ngram)
    info = {
        "dataset": dataset, "data_dir": str(data_dir), "split": split,
        "agent": run.spec.agent.model_dump(mode="json"), "reward": {"name": scorer.name, "params": reward_param},
        "index": str(index) if index else None, "index_info": index_info(idx), "model": model,
        **({"base_url": base_url} if base_url else {}),
        "temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed, "balanced": balanced,
        **({"no_repeat_ngram": no_repeat_ngram} if no_repeat_ngram else {}),
        "limit": limit, "context_sentences": run.spec.context_sentences if idx is not None else None,
        **({"verifier": verifier} if verifier else {}),
        **({"metric_params": metric_params} if metric_params else {}),
        **({"role_models": role_specs} if role_specs else {}),
        "skipped_rows": selection.skipped_rows,
        # where it ran: device and rows per forward pass may change on resumption, dtype not
        "batch_size": batch_size, **runtime_info(lm),
    }
    metrics = evaluate(
        claims,
        run.make_env,
        lm,
        out,
        rollout=spec.rollout,
        run_info=info,
        force=force,
        reward=scorer,
        lms=run.role_lms() or None,
        retry_errors=retry_errors,
        agent=run.spec.agent.name,  # agent-level metrics (Binary RAR's hallucination rates)
        metric_lms={"judge": run.judge},
        metric_params=metric_params or None,
    )
    if metrics["n"] and metrics["errors"] == metrics["n"]:
        typer.echo(f"wrote {out}/trajectories.jsonl, {out}/metrics.json, {out}/report.md, {out}/report.html")
        kinds = ", ".join(f"{k} {v}" for k, v in (metrics.get("episode_errors") or {}).items())
        typer.echo(f"error: every episode ended in an error ({kinds}); nothing was evaluated. Fix the cause and "
                   "run the same command again: episodes that ended in an LM error are run again "
                   "(--retry-errors: every errored episode)", err=True)
        raise typer.Exit(1)
    extra = f" and the agent's own metrics in {out}" if "agent_metrics" in metrics else ""
    typer.echo(f"wrote {out}/trajectories.jsonl, {out}/metrics.json, {out}/report.md, {out}/report.html{extra}")
    _say_averitec(out)


def _metric_params(agent: str, items: list[str]) -> dict:
    """``--metric-param key=value`` items, checked by the agent's own metrics."""
    from factrl.envs import ENVS, parse_params
    from factrl.metrics.run_metrics import check_metric_params

    if not items:
        return {}
    try:
        params = parse_params(items)
        check_metric_params(ENVS.canonical(agent), params)  # refused now, not after the episodes
        return params
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--metric-param") from None


def _say_averitec(out: Path) -> None:
    """On AVeriTeC claims the run also wrote the shared task's submission and scored it."""
    import json

    from factrl.metrics.averitec_submission import PREDICTIONS_FILE

    scores = json.loads((out / "metrics.json").read_text()).get("averitec")
    if not scores:
        return
    if "error" in scores:
        typer.echo(f"wrote {out}/{PREDICTIONS_FILE}; {scores['error']}")
        return
    typer.echo(f"wrote {out}/{PREDICTIONS_FILE}: Q-only {scores['q_only_meteor']:.4f}, Q+A {scores['qa_meteor']:.4f}, "
               f"label accuracy {scores['label_acc']:.4f}, AVeriTeC score {scores['averitec_score']:.4f} "
               f"(n={scores['n']}; the same as `factrl score averitec --predictions {out}/{PREDICTIONS_FILE} "
               f"--gold GOLD.json --subset`)")
