"""A recipe's view of a GRPO run directory: how far it got, and a full model for any of
its checkpoints (a LoRA adapter merged into its base once, for evaluation)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["last_step", "merged_model", "saved_marks"]


def last_step(run: Path) -> int:
    """The last optimiser step a GRPO run logged (0 when none)."""
    from factrl.train.callbacks import read_metrics

    return max((int(r.get("step", 0)) for r in read_metrics(run / "metrics.jsonl")), default=0)


def saved_marks(run: Path, steps: int, shares: tuple[float, ...], done: int) -> list[int]:
    """The steps at ``shares`` of ``steps``, before ``done``, at which ``run`` saved a
    checkpoint: shares set after the run (a resumed recipe may change them) name only
    what it saved."""
    marks = sorted({max(1, round(steps * f)) for f in shares})
    return [m for m in marks if m < done and (run / f"checkpoint-{m}").is_dir()]


def merged_model(src: Path, base: Path, dest: Path) -> Path:
    """A full model directory for ``src``: itself when it holds one, else its LoRA adapter
    merged into ``base`` (written once to ``dest``)."""
    if (src / "config.json").is_file() and not (src / "adapter_config.json").is_file():
        return src
    if (dest / "config.json").is_file():
        return dest
    if not (src / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{src} holds neither a model nor a LoRA adapter (did GRPO reach that step?)")
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, str(src)).merge_and_unload()
    dest.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(dest)
    AutoTokenizer.from_pretrained(str(base)).save_pretrained(dest)
    return dest
