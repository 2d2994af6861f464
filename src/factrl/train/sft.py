"""SFT baseline (Veri-R1 App. H): fine-tune on a teacher's fully correct trajectories.

Teacher trajectories come from ``factrl eval --model TEACHER`` (any LM backend, any
tokenizer). The student never sampled the teacher's tokens, so here — unlike in RL —
each turn's *text* is encoded with the student's tokenizer, turn by turn: the loss
covers the teacher's turns plus a closing EOS; the prompt (student chat template) and
every retrieved observation are labelled -100, as in RL.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.metrics.veri_r1 import score_item
from factrl.types import Trajectory

__all__ = ["LABEL_ONLY_AGENTS", "SFTSettings", "is_fully_correct", "select_correct", "sft_examples", "train_sft"]


@dataclass
class SFTSettings:
    learning_rate: float = 1e-5
    epochs: float = 2.0
    batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int = 2048
    lora: bool = False  # the paper used LoRA (App. H)
    lora_r: int = 16
    lora_alpha: int = 32
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    lora_layers: int | None = None  # only the top N blocks (factrl.train.lora); unset: all
    seed: int = 0
    save_steps: int = 200
    gradient_checkpointing: bool = True  # TRL's default; off is faster when memory allows
    lr_scheduler_type: str = "linear"
    warmup_steps: int = 0
    # Where it trains (auto: the first visible GPU when there is one, else CPU) and its
    # mixed precision (auto: bfloat16 on a GPU that has it, else float32); float32 master
    # weights either way. factrl.train.config.training_precision resolves them.
    device: str = "auto"
    dtype: str = "auto"


# Agents whose verdict cites no evidence ids: fully correct = every stage well formed and
# the label right (their evidence is judged by the reward, e.g. ProFact's METEOR terms).
LABEL_ONLY_AGENTS = frozenset({"profact"})


def is_fully_correct(t: Trajectory) -> bool:
    """Well formed, correct label, and evidence exactly the gold set (NEI relaxed); for
    agents that cite no evidence ids (``LABEL_ONLY_AGENTS``), well formed and correct label."""
    if t.error or not t.verdict.format_ok or t.claim.label is None:
        return False
    if t.env in LABEL_ONLY_AGENTS:
        return t.verdict.label == t.claim.label
    return score_item(t.claim.label, t.claim.evidence_ids, t.verdict).joint


def select_correct(trajs: Sequence[Trajectory]) -> list[Trajectory]:
    return [t for t in trajs if is_fully_correct(t)]


def sft_examples(trajs: Sequence[Trajectory], lm: Any, max_length: int | None = None) -> list[dict[str, list[int]]]:
    """``{"input_ids", "labels"}`` per context of each trajectory — the opening context,
    then each further context (``segments``: ProFact's per-question searches) as an
    example of its own, since a teacher writes every context of its episodes (a
    trajectory whose segments another model played, e.g. ``--role-model``, would teach
    that model's turns too) — tokenised by the student ``lm`` (an ``LM``:
    ``chat_prompt_ids``/``encode``/``eos_token_id``); labels -100 off the teacher's turns."""
    out = []
    eos_token_id = lm.eos_token_id
    for t in trajs:
        for prompt, turns in [(t.prompt, t.turns), *((s.prompt, s.turns) for s in t.segments)]:
            ids = list(lm.chat_prompt_ids(prompt))
            labels = [-100] * len(ids)
            for turn in turns:
                toks = [x for x in lm.encode(turn.text) if x != eos_token_id]
                ids += toks
                labels += toks if turn.source == "model" else [-100] * len(toks)
            if not ids or ids[-1] != eos_token_id:
                ids.append(eos_token_id)
                labels.append(eos_token_id)
            if max_length is not None and len(ids) > max_length:
                continue  # a cut example would teach an unfinished answer
            if any(x != -100 for x in labels):
                out.append({"input_ids": ids, "labels": labels})
    return out


class _TokenizerView:
    """The tokenising half of the LM protocol, from a bare HF tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id = int(tokenizer.eos_token_id)

    def chat_prompt_ids(self, messages: Sequence[Any]) -> list[int]:
        chat = [{"role": m.role, "content": m.content} for m in messages]
        out = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True, return_dict=False)
        return [int(i) for i in (out if isinstance(out, list) else out["input_ids"])]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def train_sft(trajectories: Path | Sequence[Path], model: str, out_dir: Path,
              settings: SFTSettings | None = None) -> Path:
    """Select fully correct trajectories (one file or several, e.g. one per dataset and
    setting), fine-tune ``model`` on them, save ``out_dir/final`` (with LoRA: merged, and
    the adapter itself in ``out_dir/adapter``)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from factrl.runs.trajectories import read_trajectories
    from factrl.lm.loader import resolve_model_path

    from factrl.train.config import precision_args, training_precision

    s = settings or SFTSettings()
    device, dtype = training_precision(s.device, s.dtype)  # refused before any data is read
    files = [Path(trajectories)] if isinstance(trajectories, (str, Path)) else [Path(f) for f in trajectories]
    trajs = [t for f in files for t in read_trajectories(f)]
    keep = select_correct(trajs)
    model_path = resolve_model_path(model)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    examples = sft_examples(keep, _TokenizerView(tok), s.max_length)
    skipped = sum(1 + len(t.segments) for t in keep) - len(examples)  # contexts not kept
    print(f"SFT: {len(examples)} examples from {len(keep)} fully correct of {len(trajs)} trajectories"
          + (f" ({skipped} skipped: over max_length={s.max_length} tokens or no model tokens)" if skipped else ""),
          file=sys.stderr, flush=True)
    if not keep:
        raise ValueError(f"no fully correct trajectories in {trajectories}; nothing to train on")
    if not examples:
        raise ValueError(f"all {len(keep)} fully correct trajectories in {trajectories} are longer than "
                         f"max_length={s.max_length} tokens (or hold no model tokens); raise max_length")
    peft_config: Any = None
    if s.lora:
        from factrl.train.lora import lora_config

        peft_config = lora_config(str(model_path), r=s.lora_r, alpha=s.lora_alpha,
                                  targets=s.lora_target_modules, layers=s.lora_layers)
    args = SFTConfig(
        output_dir=str(out_dir), learning_rate=s.learning_rate, num_train_epochs=s.epochs,
        per_device_train_batch_size=s.batch_size, gradient_accumulation_steps=s.gradient_accumulation_steps,
        max_length=s.max_length, seed=s.seed, save_steps=s.save_steps, report_to=[], **precision_args(device, dtype),
        logging_steps=1, dataloader_num_workers=0, gradient_checkpointing=s.gradient_checkpointing,
        lr_scheduler_type=s.lr_scheduler_type, warmup_steps=s.warmup_steps,
    )
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    from dataclasses import asdict

    from factrl.lm.device import describe_device

    (Path(out_dir) / "settings.json").write_text(json.dumps(
        {**asdict(s), "device": device, "dtype": dtype, "model": model, "examples": len(examples),
         "runtime": describe_device(device)}, indent=1) + "\n")
    trainer = SFTTrainer(model=model_path, args=args, train_dataset=Dataset.from_list(examples),
                         processing_class=tok, peft_config=peft_config)
    trainer.train()
    final = Path(out_dir) / "final"
    if s.lora:
        trainer.model.save_pretrained(Path(out_dir) / "adapter")
    m = trainer.model.merge_and_unload() if s.lora else trainer.model
    m.save_pretrained(final)
    tok.save_pretrained(final)
    return final
