"""Evaluation of a factworld recipe's stages (:mod:`factrl.recipes.factworld`) on the
held-out world, and on a validation world that picks the GRPO checkpoint to report.

The validation world (``val_seed``, ``val_claims`` > 0) is a third seed, never trained on
and never used for the held-out figures: each candidate stage (the warm-up and the real
run's checkpoints) is evaluated on its ``val_claims`` claims, and the stage with the best
validation accuracy (the earliest on a tie: the warm-up before any GRPO checkpoint) is the
run's pick — early stopping chosen without looking at the held-out world.

For Binary RAR the validation score is the no-contradiction rate, which a policy wins by
saying nothing ("X is a person." is never contradicted), so the pick also stops early on
utility as the paper does (001, App. B: training stops at a checkpoint that drops more
than 10 % on a utility benchmark): walking the checkpoints in training order, the first
whose supported facts beyond the entity's type per validation response fall more than
``val_utility_drop`` (a share) below the warm-up's ends the run there, and the pick is the
lowest contradiction rate among the warm-up and the checkpoints before that one.

Binary RAR's recipe can also ask the held-out world's short-form questions
(``short_questions`` > 0: that many answerable and that many unanswerable ones, the
world's ``rar_short/`` set) of every stage it evaluates: the answer accuracy its
contradiction rate must not cost (:mod:`factrl.recipes.factworld_short`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from factrl.types import Claim

__all__ = ["WORLDS", "correct_by_id", "eval_dir", "evaluate_heldout", "evaluate_stage", "exact_reward", "facts_by_id",
           "heldout_claims", "labels_by_id", "pick", "validate", "world_claims", "worlds_of"]

WORLDS = ("heldout", "validation", "short")  # what is evaluated ("short": the held-out world's short questions)


def _world_dir(world: str) -> str:
    """The world directory an evaluation reads (the short questions are the held-out world's)."""
    return "heldout" if world == "short" else world


def worlds_of(r: Any) -> list[tuple[str, int, int]]:
    """(directory, seed, claims) of every world a recipe writes: training, held-out and,
    when ``val_claims`` > 0, validation."""
    made = [("world", r.train_seed, r.claims), ("heldout", r.heldout_seed, max(r.heldout_claims * 2, 60))]
    if r.val_claims > 0:
        if r.val_seed in (r.train_seed, r.heldout_seed):
            raise ValueError(f"val_seed {r.val_seed} must differ from train_seed and heldout_seed")
        made.append(("validation", r.val_seed, max(r.val_claims * 2, 60)))
    return made


def world_claims(r: Any, out: Path, world: str = "heldout") -> list[Claim]:
    """The evaluated claims of a world: label-balanced, from every split (Binary RAR: its
    prompts, one per entity); ``heldout_claims`` of the held-out world, ``val_claims`` of
    the validation one."""
    from factrl.datasets import load_dataset
    from factrl.datasets.sampling import interleave_labels
    from factrl.recipes.factworld_config import env_name
    from factrl.recipes.factworld_haris import label_mix

    if world == "short":
        from factrl.recipes.factworld_short import short_claims

        return short_claims(out / "heldout", r.short_questions)
    env = env_name(r)
    where = out / world
    name, where = ("rar_prompts", where / "rar") if env == "rar" else ("factworld", where)
    claims = [c for split in ("train", "dev", "test") for c in load_dataset(name, where, split).claims]
    n = r.val_claims if world == "validation" else r.heldout_claims
    return interleave_labels(claims, seed=0, weights=label_mix(env))[:n]


def heldout_claims(r: Any, out: Path) -> list[Claim]:
    """The held-out world's evaluated claims."""
    return world_claims(r, out, "heldout")


def eval_dir(r: Any, out: Path, name: str, world: str = "heldout") -> Path:
    """Where a stage's evaluation on ``world`` is written (validation: per claim count, so
    another ``val_claims`` on a resumed run evaluates afresh)."""
    if world == "short":
        from factrl.recipes.factworld_short import short_dir

        return short_dir(r, out, name)
    d = out / "eval" if world == "heldout" else out / "eval" / f"validation-{r.val_claims}"
    return d / name.replace("@", "-").replace("%", "pct")


def evaluate_stage(r: Any, out: Path, name: str, model: Path, world: str = "heldout") -> dict[str, Any]:
    """Evaluate the stage ``name`` (model directory ``model``) on ``world``'s claims with
    its own index; skipped when done."""
    from factrl.evaluate import evaluate
    from factrl.lm.loader import load_lm
    from factrl.recipes.factworld_config import env_factory, grpo_config, say
    from factrl.recipes.factworld_haris import load_pair
    from factrl.rollout import RolloutConfig
    from factrl.train.setup import frozen_lm_options

    if world not in WORLDS:
        raise ValueError(f"world must be one of {', '.join(WORLDS)}, got {world!r}")
    d = eval_dir(r, out, name, world)
    if (d / "metrics.json").is_file():
        return json.loads((d / "metrics.json").read_text())
    cfg = grpo_config(r, out, "none")
    claims = world_claims(r, out, world)
    say(f"eval {name}: {len(claims)} {world} claims")
    pair = load_pair(model)  # HARIS after GRPO: the trained reasoner with its trained search agent
    lm = load_lm(pair["reasoner"] if pair else str(model), **frozen_lm_options(cfg.model))
    lms = {"searcher": load_lm(pair["searcher"], **frozen_lm_options(cfg.model))} if pair else None
    seed = r.val_seed if world == "validation" else r.heldout_seed
    where = out / _world_dir(world)
    return evaluate(claims, env_factory(cfg, where / "index"), lm, d, reward=exact_reward(r, where),
                    lms=lms,
                    rollout=RolloutConfig(temperature=r.eval_temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                                          max_total_tokens=cfg.rollout.max_total_tokens, batch_size=r.eval_batch,
                                          seed=r.eval_seed if r.eval_temperature > 0 else None),
                    run_info={"model": str(model), "stage": name, "world_seed": seed, "world": world,
                              **(pair or {}), "temperature": r.eval_temperature,
                              **lm.runtime_info()}, progress=False)


def evaluate_heldout(r: Any, out: Path, name: str, model: Path) -> dict[str, Any]:
    """Evaluate a stage on the held-out world and, for Binary RAR with
    ``short_questions`` > 0, on its short-form questions too."""
    from factrl.recipes.factworld_config import is_rar

    metrics = evaluate_stage(r, out, name, model)
    if is_rar(r) and r.short_questions > 0:
        evaluate_stage(r, out, name, model, "short")
    return metrics


def exact_reward(r: Any, world: Path) -> Any:
    """Binary RAR's episodes are scored by the exact verifier of ``world``; other agents'
    by their environment's own reward (None)."""
    from factrl.recipes.factworld_config import is_rar

    if not is_rar(r):
        return None
    from factrl.rewards import RewardSpec, build_reward

    return build_reward(RewardSpec(name="rar_factworld", params={"world": str(world)}))


def correct_by_id(d: Path, rar: bool = False, two_way: bool = False) -> dict[str, float]:
    """Per claim 1.0 when the verdict's label is right (Binary RAR: when the response has
    no contradicted sentence, the exact verifier's reward; ``two_way``: HARIS's scale,
    NOT ENOUGH INFO read as Refute)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    if rar:
        return {t.claim_id: float(t.reward.components.get("no_contradiction", 0.0))
                for t in read_trajectories(d / TRAJ_FILE)}
    return {i: float(right) for i, (_, _, right) in labels_by_id(d, two_way).items()}


def labels_by_id(d: Path, two_way: bool = False) -> dict[str, tuple[str, str | None, bool]]:
    """Per claim (gold label, predicted label or None when no label was read, right);
    ``two_way``: right on the agent's two-way scale (HARIS: NOT ENOUGH INFO is Refute)."""
    from factrl.protocol.haris import binary_gold
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    out = {}
    for t in read_trajectories(d / TRAJ_FILE):
        gold = binary_gold(t.claim.label) if two_way else t.claim.label
        pred = None if t.verdict.label is None else str(t.verdict.label)
        out[t.claim_id] = (str(t.claim.label), pred, t.verdict.label is not None and t.verdict.label == gold)
    return out


def candidates(stages: dict[str, Path]) -> dict[str, Path]:
    """The stages validation chooses among: the warm-up and the real run's checkpoints
    (not the base model, not the controls)."""
    return {k: v for k, v in stages.items() if k == "warmup" or k.startswith("grpo@")}


def validate(r: Any, out: Path, stages: dict[str, Path]) -> None:
    """Evaluate every candidate stage on the validation world (no-op without one)."""
    if r.val_claims <= 0:
        return
    for name, model in candidates(stages).items():
        evaluate_stage(r, out, name, model, "validation")


def facts_by_id(d: Path, world: Path) -> dict[str, float]:
    """Binary RAR: per prompt the supported facts beyond the entity's type (the reward's
    ``supported_facts``; for an evaluation written before that count existed, re-read
    from the stored response with ``world``'s exact verifier)."""
    from factrl.runs.trajectories import TRAJ_FILE, read_trajectories

    out, reward = {}, None
    for t in read_trajectories(d / TRAJ_FILE):
        value = t.reward.components.get("supported_facts")
        if value is None:
            response = str(t.meta.get("response") or "")
            if reward is None and response:
                from factrl.rewards import RewardSpec, build_reward

                reward = build_reward(RewardSpec(name="rar_factworld", params={"world": str(world)}))
            value = reward.score_response(response)["supported_facts"] if response and t.error is None else 0.0
        out[t.claim_id] = float(value)
    return out


def _utility_stop(scores: dict[str, dict[str, Any]], drop: float) -> str | None:
    """The first GRPO checkpoint (in training order) whose validation facts per response
    fall more than ``drop`` (a share) below the warm-up's: where utility early stopping
    ends the run; None when none does."""
    floor = (1.0 - drop) * scores["warmup"]["facts"]
    return next((name for name, v in scores.items() if name != "warmup" and v["facts"] < floor), None)


def pick(r: Any, out: Path, stages: dict[str, Path]) -> dict[str, Any] | None:
    """The stage with the best validation accuracy (the earliest on a tie), with every
    candidate's validation accuracy; None without a validation world or before every
    candidate is evaluated on it. Binary RAR: the lowest contradiction rate among the
    stages before the utility early stop (:func:`_utility_stop`), each candidate's facts
    per response given too."""
    if r.val_claims <= 0:
        return None
    from factrl.metrics.significance import wilson_interval
    from factrl.recipes.factworld_config import env_name

    env = env_name(r)
    rar = env == "rar"
    scores: dict[str, dict[str, Any]] = {}
    for name in candidates(stages):
        d = eval_dir(r, out, name, "validation")
        if not (d / "metrics.json").is_file():
            return None
        got = correct_by_id(d, rar, env == "haris")
        k, n = int(sum(got.values())), len(got)
        scores[name] = {"n": n, "right": k, "accuracy": k / n if n else 0.0, "ci95": list(wilson_interval(k, n))}
        if rar:
            facts = facts_by_id(d, out / "validation")
            scores[name]["facts"] = sum(facts.values()) / len(facts) if facts else 0.0
    if not any(name.startswith("grpo@") for name in scores) or "warmup" not in scores:
        return None
    kept = list(scores)
    utility = None
    if rar:
        stop = _utility_stop(scores, r.val_utility_drop)
        kept = kept[:kept.index(stop)] if stop else kept
        utility = {"measure": "supported facts beyond the type per response", "max_drop": r.val_utility_drop,
                   "floor": (1.0 - r.val_utility_drop) * scores["warmup"]["facts"], "stopped_at": stop}
    best = max(kept, key=lambda name: (scores[name]["right"], -list(scores).index(name)))
    return {"world_seed": r.val_seed, "claims": r.val_claims, "picked": best, "validation": scores,
            **({"utility_stop": utility} if utility else {})}
