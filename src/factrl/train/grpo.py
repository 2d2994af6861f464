"""GRPO over multi-turn factrl episodes on TRL's ``GRPOTrainer``.

What factrl adds to TRL: the rollout (``EnvRollout``: any factrl environment, token
truth, env mask), the reward columns, the paper presets, the held-out split, metrics
as JSONL with resume, and curves at the end. TRL is pinned (1.16.0): its rollout hook
is marked experimental, and ``tests/train/test_trl_contract.py`` fails loudly if the
contract changes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from factrl.datasets.prepare import prepare_splits
from factrl.envs.base import check_trained_temperatures
from factrl.lm.loader import resolve_model_path
from factrl.rollout import RolloutConfig
from factrl.train.config import GRPORunConfig, grpo_args, training_precision
from factrl.types import Claim

__all__ = ["train_grpo", "latest_checkpoint", "resolved_config", "training_order"]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def training_order(claims: list[Claim], cfg: GRPORunConfig) -> list[Claim]:
    """The claims in the order the trainer's dataset holds them: label-interleaved
    (seeded by ``grpo.order_seed``, else ``grpo.seed``, in the proportions of
    ``grpo.label_mix``) with ``grpo.label_balanced``, else as given (TRL then shuffles)."""
    if not cfg.grpo.label_balanced:
        if cfg.grpo.label_mix:
            raise ValueError("grpo.label_mix needs grpo.label_balanced = true")
        return list(claims)
    from factrl.datasets.sampling import interleave_labels
    from factrl.train.config import label_weights

    seed = cfg.grpo.seed if cfg.grpo.order_seed is None else cfg.grpo.order_seed
    return interleave_labels(claims, seed=seed, weights=label_weights(cfg.grpo.label_mix))


def resolved_config(cfg: GRPORunConfig) -> GRPORunConfig:
    """A copy of ``cfg`` whose ``model.device``/``model.dtype`` say what this machine
    trains on (``auto`` resolved, ``grpo.bf16`` folded into the dtype), as the run
    records them; a device or dtype it cannot honour is a ``ValueError``."""
    import copy

    out = copy.deepcopy(cfg)
    out.model.device, out.model.dtype = training_precision(cfg.model.device, cfg.model.dtype, cfg.grpo.bf16)
    return out


def latest_checkpoint(out_dir: Path) -> Path | None:
    ckpts = sorted(out_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    return ckpts[-1] if ckpts else None


def _reward_selection(reward: Any, claims: list[Claim]) -> list[Claim]:
    """The claims a reward can train on (``reward.training_claims``, e.g. Binary RAR's
    prompts with at least three documents); all of them for other rewards."""
    select = getattr(reward, "training_claims", None)
    if select is None:
        return claims
    kept = list(select(claims))
    if len(kept) < len(claims):
        _say(f"reward {getattr(reward, 'name', '')}: {len(claims) - len(kept)} of {len(claims)} training claims "
             "dropped (see its training_claims)")
    return kept


def _claim_key(c: Claim) -> str:
    return f"[{c.id}] {c.text.strip()}"


def train_grpo(
    cfg: GRPORunConfig,
    *,
    resume: bool = False,
    claims: list[Claim] | None = None,
    make_env: Any = None,
    reward: Any = None,
    lms: dict[str, Any] | None = None,
    cast_weights: bool = True,
) -> Path:
    """Run GRPO; returns the directory of the final model (``<output_dir>/final``).

    A caller that composes stages (HARIS's coordinated training) may pass the training
    ``claims`` (instead of the config's data split), the environment factory, the reward
    (e.g. with a judge LM) and ``lms`` for roles other than the trained policy.
    ``cast_weights=False`` leaves CPU mixed precision's frozen-weight casts to autocast
    (the same numbers, slower: :class:`factrl.train.callbacks.FrozenWeightCasts`)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from factrl.lm.device import describe_device, torch_dtype
    from factrl.train.callbacks import (ExtraLogs, FrozenWeightCasts, JsonlMetricsCallback, NonFiniteGradGuard,
                                        TimeBudgetCallback, plot_curves)
    from factrl.train.rollout_adapter import EnvRollout, contexts_per_trajectory, reward_functions, trained_roles
    from factrl.train.setup import run_env_factory, run_reward
    from factrl.train.trl_lm_head import compact_lm_head

    ran = resolved_config(cfg)  # what this machine trains on, as the run records it
    out = Path(cfg.output_dir)
    ckpt = latest_checkpoint(out) if resume else None
    if not resume and ckpt is None and latest_checkpoint(out) is not None:
        raise FileExistsError(f"{out} already has checkpoints; pass --resume or choose another output dir")
    out.mkdir(parents=True, exist_ok=True)
    make_env = make_env or run_env_factory(cfg)
    reward = reward or run_reward(cfg, make_env)
    train_claims = training_order(_reward_selection(reward, list(claims) if claims is not None
                                                    else prepare_splits(cfg.data, out)[0]), cfg)
    (out / "config.json").write_text(json.dumps({**ran.to_dict(), "runtime": describe_device(ran.model.device)},
                                                indent=2) + "\n")
    by_key = {_claim_key(c): c for c in train_claims}
    g, r = cfg.grpo, cfg.rollout
    # every context the policy generates in is a completion of its own (ProFact's searches)
    probe = make_env()
    rows, roles = contexts_per_trajectory(probe, lms), trained_roles(probe, lms)
    check_trained_temperatures(probe, roles, r.temperature)  # TRL recomputes logprobs at it
    rollout = EnvRollout(
        by_key,
        make_env,
        RolloutConfig(
            temperature=r.temperature,
            max_new_tokens=r.max_new_tokens,
            max_total_tokens=r.max_total_tokens,
            batch_size=r.batch_size,
            seed=g.seed,
        ),
        reward,
        lms=lms,
        rows_per_trajectory=rows,
        roles=roles,
        control=g.control,
        trained_turns=g.trained_turns,
        group_size=g.num_generations,
        resample_constant=g.resample_constant,
        resample_on=g.resample_on,
    )
    funcs, weights = reward_functions(reward, control=g.control)
    # device and mixed precision from model.device/model.dtype (use_cpu: transformers
    # refuses bf16 without an accelerator unless told the run is on CPU)
    args = GRPOConfig(**grpo_args(cfg, rows_per_trajectory=rows), reward_weights=weights)
    peft_config = None
    if cfg.model.lora:
        from factrl.train.lora import lora_config

        m = cfg.model
        peft_config = lora_config(resolve_model_path(m.id), r=m.lora_r, alpha=m.lora_alpha, dropout=m.lora_dropout,
                                  targets=m.lora_target_modules, layers=m.lora_layers)
    model_path = resolve_model_path(cfg.model.id)
    compact_lm_head()  # the CPU scores completion tokens only, as CUDA does (trl_lm_head)
    # CPU mixed precision: frozen weights cast once a run, not at every call (bit-identical)
    casts = (FrozenWeightCasts(torch_dtype(ran.model.dtype))
             if ran.model.device == "cpu" and ran.model.dtype in ("bfloat16", "float16") and cast_weights else None)
    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=funcs,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": list(by_key)}),
        rollout_func=rollout,
        peft_config=peft_config,
        callbacks=[NonFiniteGradGuard()] + ([ExtraLogs(rollout.resampled.take)] if g.resample_constant else [])
        + [JsonlMetricsCallback(out / "metrics.jsonl")]
        + ([TimeBudgetCallback(g.max_minutes)] if g.max_minutes else []) + ([casts] if casts else []),
    )
    _say(
        f"GRPO: {len(train_claims)} training claims, model {cfg.model.id} on {ran.model.device} "
        f"({ran.model.dtype}), preset {cfg.preset.name}"
        + (f", {rows} completions per trajectory (one per trained context)" if rows > 1 else "")
        + (f", resuming from {ckpt.name}" if ckpt else "")
    )
    try:
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
    finally:
        if casts:
            casts.release()
    final = out / "final"
    model = trainer.model
    if cfg.model.lora:
        model = model.merge_and_unload()
    model.save_pretrained(final)
    trainer.processing_class.save_pretrained(final)
    plot_curves(out / "metrics.jsonl", out / "curves.png")
    _say(f"saved {final}; metrics {out / 'metrics.jsonl'}; curves {out / 'curves.png'}")
    return final
