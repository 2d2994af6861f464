"""Before/after evaluation on the held-out claims of a training run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from factrl.train.config import GRPORunConfig
from factrl.types import Claim

__all__ = ["evaluate_held_out", "learning_table"]


def evaluate_held_out(cfg: GRPORunConfig, model: str, out_dir: Path, *, batch_size: int | None = None,
                      lms: dict[str, str] | None = None, deps: Any = None,
                      claims: Sequence[Claim] | None = None, run_info: dict[str, Any] | None = None,
                      rollout: Any = None) -> dict[str, Any]:
    """Greedy evaluation of ``model`` on the run's held-out claims (resumable), on the
    run's ``model.device``/``model.dtype``; ``batch_size`` episodes at a time (None: the
    device's generation batch, 32 on CPU); ``lms`` maps other roles to models (HARIS:
    ``{"searcher": path}``). ``claims`` replaces the held-out claims of the run's split (a
    recipe with its own splits); ``run_info`` adds to what the run records; ``rollout``
    replaces the greedy rollout of the run's token limits. Components
    come from the run builder (:func:`factrl.train.setup.run_components`), so the agent,
    its reward and the reward's frozen model are those training used."""
    from dataclasses import replace

    from factrl.components import ModelLoading
    from factrl.datasets.prepare import prepare_splits
    from factrl.envs import POLICY
    from factrl.evaluate import evaluate
    from factrl.lm.loader import remote_backend
    from factrl.rollout import RolloutConfig
    from factrl.train.setup import run_components, run_spec

    if claims is None:
        _, held_out = prepare_splits(cfg.data, Path(cfg.output_dir))  # the split training recorded
        if not held_out:
            raise ValueError(f"{cfg.output_dir} holds no claims out (data.held_out_fraction = "
                             f"{cfg.data.held_out_fraction}): evaluate on another split with factrl eval")
    else:
        held_out = list(claims)
    local = batch_size and remote_backend(model) is None
    spec = run_spec(cfg, model=model, load_policy=True)
    spec = replace(spec, models={**(lms or {}), POLICY: model},
                   loading=ModelLoading(max_batch_size=batch_size if local else None))
    run = run_components(cfg, deps, spec=spec)
    lm = run.policy
    batch_size = batch_size or getattr(lm, "max_batch_size", 32)
    info = {"model": model, "agent": run.spec.agent.model_dump(mode="json"),
            "held_out": len(held_out), "dataset": cfg.data.dataset,
            "batch_size": batch_size, **(lm.runtime_info() if hasattr(lm, "runtime_info") else {}),
            **(run_info or {})}
    if lms:
        info["lms"] = dict(lms)
    metrics = evaluate(
        held_out,
        run.make_env,
        lm,
        out_dir,
        rollout=rollout or RolloutConfig(
            temperature=0.0,
            max_new_tokens=cfg.rollout.max_new_tokens,
            max_total_tokens=cfg.rollout.max_total_tokens,
            batch_size=batch_size,
        ),
        run_info=info,
        reward=run.reward,
        lms=run.role_lms(),
        # the agent's own metrics; the reward's LM judges before and after alike
        agent=run.spec.agent.name,
        metric_params=cfg.env.metric_params or None,
    )
    return metrics


def learning_table(run_dir: Path) -> str:
    """Markdown table: held-out metrics before → after, with the majority-class baseline."""
    before = json.loads((run_dir / "eval_before" / "metrics.json").read_text())
    after = json.loads((run_dir / "eval_after" / "metrics.json").read_text())
    rows = ["format_ok_rate", "label_acc", "macro_f1", "verification_acc", "joint_acc", "evidence_score"]
    maj = before.get("majority_baseline") or {}
    lines = [
        f"Held-out claims: {before['n']} (majority class {maj.get('label')}: {_f(maj.get('acc'))})",
        "",
        "| metric | before | after |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {_f(before.get(k))} | {_f(after.get(k))} |" for k in rows]
    lines.append(f"| mean_reward | {_f(before.get('mean_reward'))} | {_f(after.get('mean_reward'))} |")
    lines += _averitec_rows(before, after)
    lines += _hallucination_rows(run_dir)
    return "\n".join(lines) + "\n"


def _averitec_rows(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The AVeriTeC scores (ProFact's own metrics), when both evaluations have them."""
    a, b = before.get("averitec"), after.get("averitec")
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return []
    keys = ("q_only_meteor", "qa_meteor", "averitec_score", "label_macro_f1")
    return [f"| averitec.{k} | {_f(a.get(k))} | {_f(b.get(k))} |" for k in keys]


def _hallucination_rows(run_dir: Path) -> list[str]:
    """Binary RAR's rates, when both evaluations wrote them (``--agent rar``)."""
    paths = [run_dir / d / "hallucination.json" for d in ("eval_before", "eval_after")]
    if not all(p.is_file() for p in paths):
        return []
    before, after = (json.loads(p.read_text()) for p in paths)
    keys = [("long_form", "hallucination_rate"), ("long_form", "mean_claims"),
            ("short_form", "hallucination_rate_attempted"), ("short_form", "abstention_rate")]
    return [f"| {a}.{b} | {_f(before[a].get(b))} | {_f(after[a].get(b))} |" for a, b in keys]


def _f(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"
