"""How a factworld recipe (:mod:`factrl.recipes.factworld`) configures its GRPO runs and
environments from its settings: shared by its stages and its evaluation."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["env_factory", "env_name", "grpo_config", "is_rar", "say"]


def say(msg: str) -> None:
    print(f"[factworld {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def env_name(r: Any) -> str:
    """The agent (environment) the recipe's preset, with its overrides, trains."""
    from factrl.train.config import load_run_config

    return str(load_run_config(r.preset, dict(r.grpo_overrides)).env.name)


def is_rar(r: Any) -> bool:
    """Binary RAR's recipe: prompts to answer (the worlds' ``rar/`` sets), not claims."""
    return env_name(r) == "rar"


def grpo_config(r: Any, out: Path, control: str) -> Any:
    """The GRPO run config of run ``control`` ("none": the real one) of recipe ``r`` under
    ``out``: the preset with the recipe's overrides, training world and warm-up, and a
    checkpoint at each of ``r.checkpoints``."""
    from factrl.recipes.factworld_short import MIXED_DIR
    from factrl.train.config import load_run_config

    prompts = MIXED_DIR if getattr(r, "train_short", False) else "rar"
    data = ({"data.dataset": "rar_prompts", "data.data_dir": str(out / "world" / prompts)} if is_rar(r) else
            {"data.dataset": "factworld", "data.data_dir": str(out / "world")})
    sets: dict[str, Any] = {
        **data, "env.index": str(out / "world" / "index"),
        "model.device": r.device, "model.dtype": r.dtype,
        **r.grpo_overrides,
        "model.id": str(out / "warmup" / "final"), "grpo.control": control,
    }
    cfg = load_run_config(r.preset, sets)
    if cfg.reward.name == "rar_factworld":
        # the exact verifier checks the training world; another reward (``rar`` with
        # ``reward.verifier``) reads the prompts' notes. Held-out figures are exact either way.
        cfg.reward.params = {**cfg.reward.params, "world": str(out / "world")}
    cfg.output_dir = str(out / f"grpo-{control}")
    steps = cfg.grpo.max_steps
    marks = sorted({max(1, round(steps * f)) for f in r.checkpoints})
    cfg.grpo.save_steps = marks[0] if len(marks) == 1 else _gcd(marks)
    stage = cfg.haris.reasoner_steps_per_stage or cfg.haris.steps_per_stage
    if cfg.env.name == "haris" and cfg.haris.rounds == 0 and stage:
        # the budget is the one reasoner stage's updates: save at their shares too
        cfg.grpo.save_steps = _gcd([cfg.grpo.save_steps, *(max(1, round(stage * f)) for f in r.checkpoints)])
    cfg.grpo.save_total_limit = None
    return cfg


def _gcd(xs: list[int]) -> int:
    from math import gcd

    g = 0
    for x in xs:
        g = gcd(g, x)
    return max(1, g)


def env_factory(cfg: Any, index_dir: Path) -> Any:
    from factrl.train.setup import run_env_factory

    cfg = _replace_index(cfg, index_dir)
    return run_env_factory(cfg)


def _replace_index(cfg: Any, index_dir: Path) -> Any:
    import copy

    cfg = copy.deepcopy(cfg)
    cfg.env.index = str(index_dir)
    return cfg
