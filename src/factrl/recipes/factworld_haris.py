"""HARIS in the factworld recipe (:mod:`factrl.recipes.factworld`): coordinated GRPO
(:func:`factrl.train.haris.train_haris`, Algorithm 1) from the warm-up, which plays both
agents at the start, and the stages to evaluate — after each reasoner stage, the
(reasoner, search agent) pair then in use, written as ``haris_pair.json`` in the stage's
``models/`` directory and read back by the evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["PAIR_FILE", "TWO_WAY_MIX", "grpo", "label_mix", "load_pair", "stages"]

PAIR_FILE = "haris_pair.json"
# HARIS reads NOT ENOUGH INFO as Refute: two SUPPORT claims per REFUTE and NOT ENOUGH INFO
# one give as many Support as Refute claims (a constant Refute would score 2/3 otherwise)
TWO_WAY_MIX = {"SUPPORT": 2}


def label_mix(env: str) -> dict[str, int] | None:
    """How the recipe deals teacher and held-out claims for an agent (None: one of each)."""
    return dict(TWO_WAY_MIX) if env == "haris" else None


def grpo(cfg: Any) -> Path:
    """Run (or resume) the coordinated stages; finished stages are skipped."""
    from factrl.train.haris import train_haris

    train_haris(cfg, resume=True)
    return Path(cfg.output_dir)


def stages(cfg: Any, out: Path, control: str, warmup: Path,
           checkpoints: tuple[float, ...] = (1.0,)) -> dict[str, Path]:
    """``grpo@P%`` (the real run: after the reasoner stages that ``checkpoints``, shares
    of the run, name — the share rounded to a stage, at least the first —, P its share of
    the reasoner stages) or ``control-<name>@P%`` (the last reached only) -> a directory
    holding the pair's ``haris_pair.json``; stages not reached yet are left out. A run of
    one reasoner stage (``haris.rounds = 0``) has its budget inside that stage: a share
    below 1 names the stage's saved checkpoint at that share of its updates (its LoRA
    adapter merged into ``warmup`` once, beside the pair file), with the stage's search
    agent; a share whose checkpoint was not saved is left out."""
    from factrl.train.haris import stage_names

    run = Path(cfg.output_dir)
    names = stage_names(cfg.haris.rounds)
    reasoner_stages = [n for n in names if n.endswith("/reasoner")]
    searcher = warmup
    pairs: list[tuple[int, Path, Path]] = []
    for k, name in enumerate(reasoner_stages, 1):
        prefix = name.split("/")[0]
        trained = run / prefix / "searcher" / "final"
        if (trained / "config.json").is_file():  # a skipped searcher stage keeps the last one
            searcher = trained
        reasoner = run / name / "final"
        if not (reasoner / "config.json").is_file():
            break
        pairs.append((round(100 * k / len(reasoner_stages)), reasoner, searcher))
    marks = {max(1, round(len(reasoner_stages) * f)) for f in checkpoints}
    chosen = [p for k, p in enumerate(pairs, 1) if k in marks]
    if pairs and pairs[-1] not in chosen and len(pairs) == len(reasoner_stages):
        chosen.append(pairs[-1])  # the finished run is always evaluated
    if control == "none" and len(reasoner_stages) == 1 and pairs:
        chosen = _within_stage(run / reasoner_stages[0], out, warmup, pairs[0][2], checkpoints) + chosen
    found: dict[str, Path] = {}
    for pct, reasoner, searcher in chosen if control == "none" else pairs[-1:]:
        name = ("grpo" if control == "none" else f"control-{control}") + f"@{pct}%"
        d = out / "models" / name.replace("@", "-").replace("%", "pct")
        d.mkdir(parents=True, exist_ok=True)
        (d / PAIR_FILE).write_text(json.dumps({"reasoner": str(reasoner), "searcher": str(searcher)}, indent=2) + "\n")
        found[name] = d
    return found


def _within_stage(stage: Path, out: Path, warmup: Path, searcher: Path,
                  checkpoints: tuple[float, ...]) -> list[tuple[int, Path, Path]]:
    """``(P, reasoner, searcher)`` for each share of ``checkpoints`` below 1 whose
    checkpoint the finished one-stage run ``stage`` saved."""
    from factrl.recipes.checkpoints import last_step, merged_model, saved_marks

    total = last_step(stage)
    found = []
    for m in saved_marks(stage, total, tuple(f for f in checkpoints if f < 1), total):
        pct = round(100 * m / total)
        found.append((pct, merged_model(stage / f"checkpoint-{m}", warmup,
                                        out / "models" / f"grpo-{pct}pct" / "reasoner"), searcher))
    return found


def load_pair(model: Path) -> dict[str, str] | None:
    """The pair a stage directory names (None: a single model plays both agents)."""
    path = Path(model) / PAIR_FILE
    if not path.is_file():
        return None
    pair = json.loads(path.read_text())
    return {"reasoner": str(pair["reasoner"]), "searcher": str(pair["searcher"])}
