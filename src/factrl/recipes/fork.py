"""Start a factworld recipe run from another run's worlds, teacher episodes and warm-up
(``factrl train factworld --fork-from RUN``): a replicate with another GRPO seed, learning
rate or budget skips the ten minutes those stages take, and cannot differ from its source
in anything they made.

A fork may change only what comes after the warm-up: GRPO, rollout and reward settings
(``grpo_overrides`` keys ``grpo.*``, ``rollout.*``, ``reward.*`` and ``haris.*``: the
teacher and the warm-up never read the GRPO reward nor HARIS's training rounds), the checkpoints, the controls and
what :data:`~factrl.recipes.settings.RESUMABLE` lists. Any other difference (the worlds,
the teacher, the warm-up's SFT, the environment, the model) is refused by name before
anything is copied. The copied stages are real copies, not links, so the fork's resumes
never write into its source. The base model's and the warm-up's evaluations are copied
too when nothing they depend on changed (the fork changes ``grpo.*`` overrides alone, on
the same device, dtype and evaluation batch; validation and short-question evaluations
also need the same counts); otherwise they run again, as every later stage's does.
``forked_from.json`` records the source and what was copied.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from factrl.recipes.settings import RESUMABLE, changed_settings

__all__ = ["COPIED", "FORKABLE", "fork_differences", "fork_run"]

# The stage outputs a fork copies: everything the warm-up needs and makes.
COPIED = ("world", "heldout", "validation", "teach", "warmup")
# Recipe settings a fork may change besides RESUMABLE (and grpo/rollout overrides).
FORKABLE = ("checkpoints",)
# haris.*: Algorithm 1's rounds, stage budgets and judges (factrl.train.haris only; the
# teacher and the warm-up never read them)
FORKABLE_OVERRIDE_PREFIXES = ("grpo.", "rollout.", "reward.", "haris.")


def _before_warmup(overrides: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in overrides.items() if not k.startswith(FORKABLE_OVERRIDE_PREFIXES)}


def fork_differences(source: dict[str, Any], now: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The settings of ``now`` that a fork of a run recorded as ``source`` may not change:
    :func:`~factrl.recipes.settings.changed_settings` less the checkpoints and the GRPO and
    rollout overrides (an ``env.*`` or ``model.*`` override is named as ``grpo_overrides``)."""
    def strip(d: dict[str, Any]) -> dict[str, Any]:
        d = {k: v for k, v in d.items() if k not in FORKABLE}
        if isinstance(d.get("grpo_overrides"), dict):
            d["grpo_overrides"] = _before_warmup(d["grpo_overrides"])
        return d

    return changed_settings(strip(source), strip(now), strip(defaults))


def fork_run(source: Path, out: Path, now: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """Copy ``source``'s stages up to the warm-up into the new run directory ``out``;
    returns the copied stage directories (none when ``out`` is this fork, made before:
    it resumes). Refuses a source without a finished warm-up, an ``out`` that holds
    another recipe run, and settings a fork may not change."""
    source, out = Path(source), Path(out)
    recorded = source / "recipe.json"
    if not recorded.is_file():
        raise FileNotFoundError(f"{source} is not a factworld recipe run (no recipe.json)")
    if not (source / "warmup" / "final" / "config.json").is_file():
        raise ValueError(f"{source} has no finished warm-up (warmup/final); run its warmup stage first")
    if source.resolve() == out.resolve():
        raise ValueError("--fork-from names the run directory itself; give the fork another --out")
    before = json.loads(recorded.read_text())
    if (out / "recipe.json").is_file():
        if _forked_from(out) == str(source.resolve()):
            return []  # the fork made before: the run resumes, its settings checked as any resume's
        raise ValueError(f"{out} already holds a recipe run; a fork needs a new --out")
    changed = fork_differences(before, now, defaults)
    if changed:
        prefixes = ", ".join(k + "*" for k in FORKABLE_OVERRIDE_PREFIXES)
        raise ValueError(f"a fork of {source} may change only GRPO, rollout, reward and HARIS-training settings "
                         f"(grpo_overrides {prefixes}), the checkpoints and {', '.join(RESUMABLE)}; "
                         f"it changes {', '.join(changed)}")
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in COPIED:
        src = source / name
        # the validation world's size follows val_claims: another count makes its own
        if not src.is_dir() or (name == "validation" and before.get("val_claims") != now.get("val_claims")):
            continue
        dst = out / name
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(src, dst, ignore=_no_resume_point(src) if name == "warmup" else None)
        copied.append(name)
    if _same_starting_evaluations(before, now):
        copied += _copy_starting_evaluations(source, out, before, now)
    from factrl.runs.info import write_json_atomic

    write_json_atomic(out / "forked_from.json", {"run": str(source.resolve()), "copied": copied,
                                                  "source_recipe": before})
    return copied


def _no_resume_point(warmup: Path) -> Any:
    """``copytree``'s ignore: the warm-up's ``checkpoint/`` (the SFT's resume point), no other."""
    return lambda d, names: ["checkpoint"] if Path(d) == warmup and "checkpoint" in names else []


def _forked_from(out: Path) -> str | None:
    try:
        return str(json.loads((out / "forked_from.json").read_text())["run"])
    except (OSError, ValueError, KeyError, TypeError):
        return None



# The evaluated starting points a fork can reuse, and the settings their evaluation reads
# besides those a fork may not change at all.
STARTING_POINTS = ("base", "warmup")
EVALUATION_SETTINGS = ("device", "dtype", "eval_batch")


def _same_starting_evaluations(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether the base model's and the warm-up's evaluations would come out as the
    source's: its overrides differ in ``grpo.*`` keys alone (rollout, reward and HARIS
    settings reach the evaluation) and the device, dtype and batch are the same."""
    a, b = before.get("grpo_overrides") or {}, now.get("grpo_overrides") or {}
    changed = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    return (all(k.startswith("grpo.") for k in changed)
            and all(before.get(k) == now.get(k) for k in EVALUATION_SETTINGS))


def _copy_starting_evaluations(source: Path, out: Path, before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Copy the finished evaluations of :data:`STARTING_POINTS` (held out; validation and
    short questions at unchanged counts), leaving their lock files behind."""
    folders = [Path("eval")]
    if before.get("val_claims") == now.get("val_claims"):
        folders.append(Path("eval") / f"validation-{now.get('val_claims')}")
    if before.get("short_questions") == now.get("short_questions"):
        folders.append(Path("eval") / f"short-{now.get('short_questions')}")
    copied = []
    for folder in folders:
        for name in STARTING_POINTS:
            src = source / folder / name
            if not (src / "metrics.json").is_file():
                continue  # unfinished: the fork evaluates it
            dst = out / folder / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
            copied.append(str(folder / name))
    return copied
