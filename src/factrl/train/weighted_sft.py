"""Decision-weighted SFT: LoRA on teacher trajectories with the deciding tokens weighted.

Teacher-forced trajectory SFT spends its loss on the protocol: of the ~120 tokens a
Veri-R1 answer holds, two or three carry the decision (whether it quotes evidence at
all, the verb of the judgement sentence, the label's first token) and everything after
them is copying. A warm-up trained that way learns the protocol and a label prior, not
the judgement (docs/benchmarks.md, the label probe). Here every model token still
counts, but the deciding tokens (:func:`decision_spans`) weigh ``decision_weight`` times
as much.

The loop is a plain PyTorch one, not TRL's, for speed on CPU: batches are built by
length (few pad tokens), the vocabulary projection runs only on the positions that
carry a loss, and a checkpoint (adapter, optimiser, step) is written every
``save_minutes`` so an interrupted run resumes where it stopped with the same batches.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factrl.types import Trajectory

__all__ = ["WeightedSFTSettings", "decision_spans", "length_batches", "train_weighted_sft",
           "train_weighted_sft_on", "weighted_examples"]

# Where a Veri-R1 answer decides: the first token of each <think> (a template answer
# commits there to quoting evidence or to "None of the information ..."), the verb of
# the judgement sentence ("This states" / "This contradicts") and the first token of the
# Label line's value. Every token after these is determined by them (copying), so only
# these carry the judgement; weighting whole sentences would dilute it again.
_DECISION = (
    re.compile(r"(?<=This )(?:states|contradicts)"),
    re.compile(r"(?<=Label: )\S"),
)
_THINK = "<think>"
# Where a comparing verification decides (HARIS's and ProFact's "compare" teachers:
# "The claim says X. The search agent found Y. Same, so ..."): the comparison's word,
# weighted by its own ``comparison_weight`` (1 unless a recipe asks).
_COMPARISON = re.compile(r"(?<=\. )(?:Same|Different)(?=, )")


def decision_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of ``text`` where the decision is made (see ``_DECISION``)."""
    spans = [(m.start(), m.end()) for pat in _DECISION for m in pat.finditer(text)]
    start = 0
    while (i := text.find(_THINK, start)) >= 0:
        j = i + len(_THINK)
        spans.append((j, j + 1))
        start = j
    return sorted(spans)


@dataclass
class WeightedSFTSettings:
    learning_rate: float = 2e-4
    epochs: float = 1.0
    tokens_per_batch: int = 4096  # padded tokens per optimiser step
    max_length: int = 1150  # longer contexts are skipped and counted (a cut one teaches an unfinished answer)
    lora_r: int = 16
    lora_alpha: int = 32
    lora_target_modules: list[str] = field(default_factory=lambda: [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    lora_layers: int | None = None  # only the top N blocks (factrl.train.lora); unset: all
    decision_weight: float = 4.0
    warmup_steps: int = 3
    seed: int = 0
    save_minutes: float = 5.0
    max_minutes: float | None = None  # stop (and save final/) after this many minutes of training
    # Continue training this LoRA adapter (a directory with adapter_config.json, e.g. the
    # shipped agent's) on ``model_path`` as its base, instead of a new one: the result
    # keeps its rank, so it exports without truncation. lora_* settings are then unused.
    init_adapter: str | None = None
    # Where it trains (auto: CUDA when available, cuda:N honoured) and its autocast
    # precision (auto: bfloat16 on a GPU that has it, else float32); the LoRA weights stay
    # float32. A resumed run may change either.
    device: str = "auto"
    dtype: str = "auto"
    # With lora_layers, keep each example's hidden state at the first trained block from
    # its first pass and run only the trained blocks on it in later epochs
    # (factrl.train.prefix_cache), up to this many GB of float32 states; 0 turns it off.
    prefix_cache_gb: float = 2.0
    # Run the instructions that at least two examples begin with (this many tokens or
    # more) once per step instead of once per row (factrl.train.shared_prompt): the same
    # loss with less work; 0 turns it off.
    shared_prompt_tokens: int = 64


def weighted_examples(trajs: Sequence[Trajectory], tokenizer: Any, *, decision_weight: float,
                      max_length: int | None = None,
                      comparison_weight: float = 1.0) -> tuple[list[dict[str, list]], int]:
    """``({"input_ids", "labels", "weights"}, skipped)`` per context of each trajectory,
    tokenised turn by turn as in :func:`factrl.train.sft.sft_examples` (prompt and
    observations unlabelled, a closing EOS labelled); model tokens that overlap a
    :func:`decision_spans` span weigh ``decision_weight``, those of a comparison's word
    (``Same`` / ``Different``) ``comparison_weight``, the others 1."""
    from factrl.train.sft import _TokenizerView

    view = _TokenizerView(tokenizer)
    eos = view.eos_token_id
    out, skipped = [], 0
    for t in trajs:
        for prompt, turns in [(t.prompt, t.turns), *((s.prompt, s.turns) for s in t.segments)]:
            ids = view.chat_prompt_ids(prompt)
            labels, weights = [-100] * len(ids), [0.0] * len(ids)
            for turn in turns:
                enc = tokenizer(turn.text, add_special_tokens=False, return_offsets_mapping=True)
                toks, offsets = list(enc["input_ids"]), list(enc["offset_mapping"])
                model = turn.source == "model"
                spans = decision_spans(turn.text) if model else []
                compared = [(x.start(), x.end()) for x in _COMPARISON.finditer(turn.text)] if model else []
                for tok, (a, b) in zip(toks, offsets):
                    if tok == eos:
                        continue
                    ids.append(tok)
                    labels.append(tok if model else -100)
                    weight = decision_weight if _overlaps(a, b, spans) else 1.0
                    if _overlaps(a, b, compared):
                        weight = comparison_weight
                    weights.append(weight if model else 0.0)
            if ids[-1] != eos:
                ids.append(eos)
                labels.append(eos)
                weights.append(1.0)
            if (max_length is not None and len(ids) > max_length) or all(x == -100 for x in labels):
                skipped += 1
                continue
            out.append({"input_ids": ids, "labels": labels, "weights": weights})
    return out, skipped


def _overlaps(a: int, b: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether the token at characters ``[a, b)`` (an empty one counts as its first
    character) overlaps any of ``spans``."""
    return any(a < e and s < max(b, a + 1) for s, e in spans)


def length_batches(lengths: Sequence[int], tokens_per_batch: int, seed: int) -> list[list[int]]:
    """Indices grouped by length so that ``rows × longest`` stays within
    ``tokens_per_batch`` (one over-long row still makes a batch), in a seeded random
    order of batches."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) + 1) * lengths[i] > tokens_per_batch:
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    random.Random(seed).shuffle(batches)
    return batches


def _schedule(settings: WeightedSFTSettings, epoch_batches: list[list[list[int]]]) -> list[list[int]]:
    """Every epoch's batches (each epoch reshuffled), a fractional last epoch cut."""
    full = math.floor(settings.epochs)
    steps: list[list[int]] = []
    for e, batches in enumerate(epoch_batches[: full + 1]):
        take = len(batches) if e < full else round(len(batches) * (settings.epochs - full))
        steps += batches[:take]
    return steps


def _by_prompt(rows: Sequence[int], of: Sequence[int]) -> list[tuple[int, list[int]]]:
    """``rows`` grouped by the shared prompt they begin with (-1: none), in first-seen order."""
    groups: dict[int, list[int]] = {}
    for r in rows:
        groups.setdefault(of[r], []).append(r)
    return list(groups.items())


def _padded(rows: Sequence[dict[str, list]], cut: int, pad: int, device: str) -> tuple[Any, Any, Any, Any]:
    """Right-padded ``input_ids``, attention mask, labels and weights of ``rows`` from
    token ``cut`` on."""
    import torch

    width = max(len(r["input_ids"]) for r in rows) - cut
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    tgt = torch.full_like(ids, -100)
    wts = torch.zeros((len(rows), width), dtype=torch.float32)
    for b, r in enumerate(rows):
        n = len(r["input_ids"]) - cut
        ids[b, :n] = torch.tensor(r["input_ids"][cut:])
        attn[b, :n] = 1
        tgt[b, :n] = torch.tensor(r["labels"][cut:])
        wts[b, :n] = torch.tensor(r["weights"][cut:])
    return tuple(x.to(device) for x in (ids, attn, tgt, wts))


def _identity(s: WeightedSFTSettings) -> dict[str, Any]:
    """The settings that shape the trained weights (a resumed run must match them; its
    time limits, device and precision may change)."""
    skip = ("save_minutes", "max_minutes", "device", "dtype", "prefix_cache_gb", "shared_prompt_tokens")
    return {k: v for k, v in asdict(s).items()
            if k not in skip and not (k == "lora_layers" and v is None)}  # unset: as before the option


def _trim_log(path: Path, step: int) -> None:
    """Keep the log records up to ``step`` (the checkpoint's): steps logged after it are
    trained again on resume and would otherwise be logged twice. A line cut short by the
    crash is dropped too."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["step"] <= step:
                keep.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    path.write_text("".join(line + "\n" for line in keep))


def train_weighted_sft(examples: Sequence[dict[str, list]], model_path: str, out_dir: Path,
                       settings: WeightedSFTSettings | None = None) -> Path:
    """LoRA-train ``model_path`` on ``examples`` (from :func:`weighted_examples`); writes
    ``out_dir/log.jsonl`` as it goes, checkpoints to ``out_dir/checkpoint`` and resumes
    from it, and saves the merged model to ``out_dir/final`` (the adapter to
    ``out_dir/adapter``)."""
    import torch
    from peft import PeftModel, get_peft_model, set_peft_model_state_dict
    from peft.utils import get_peft_model_state_dict
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from factrl.lm.device import describe_device, torch_dtype
    from factrl.train.config import training_precision
    from factrl.train.lora import lora_config
    from factrl.train.prefix_cache import FrozenPrefixCache, frozen_blocks
    from factrl.train.shared_prompt import SharedPromptRunner, find_shared_prompts, supported
    from factrl.lm.autocast_weights import cast_frozen_weights

    s = settings or WeightedSFTSettings()
    device, dtype = training_precision(s.device, s.dtype, trainer="plain")
    out_dir = Path(out_dir)
    final = out_dir / "final"
    if (final / "config.json").exists():
        return final
    if not examples:
        raise ValueError("no examples to train on")
    out_dir.mkdir(parents=True, exist_ok=True)
    lengths = [len(x["input_ids"]) for x in examples]
    steps = _schedule(s, [length_batches(lengths, s.tokens_per_batch, s.seed + e)
                          for e in range(math.ceil(s.epochs))])
    torch.manual_seed(s.seed)
    tok = AutoTokenizer.from_pretrained(model_path)
    base = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    if s.init_adapter:
        model = PeftModel.from_pretrained(base, s.init_adapter, is_trainable=True)
        model.float()
    else:
        model = get_peft_model(base, lora_config(str(model_path), r=s.lora_r, alpha=s.lora_alpha,
                                                 targets=s.lora_target_modules, layers=s.lora_layers))
    model.to(device)
    # mixed precision: float32 weights, bf16/fp16 autocast; fp16 gradients need loss scaling
    mixed = dtype != "float32"
    autocast = torch.autocast(torch.device(device).type, dtype=torch_dtype(dtype if mixed else "bfloat16"),
                              enabled=mixed)
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=dtype == "float16")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s.learning_rate, weight_decay=0.0)
    total = len(steps)

    def lr_at(step: int) -> float:  # linear warm-up, then cosine to 0
        if step < s.warmup_steps:
            return s.learning_rate * (step + 1) / s.warmup_steps
        frac = (step - s.warmup_steps) / max(1, total - s.warmup_steps)
        return s.learning_rate * 0.5 * (1 + math.cos(math.pi * frac))

    ckpt = out_dir / "checkpoint"
    start = 0
    if (ckpt / "state.pt").exists():
        state = torch.load(ckpt / "state.pt", weights_only=False, map_location="cpu")
        if state["total"] != total or state["settings"] != _identity(s):
            raise ValueError(f"{ckpt} was written by another run (other settings or data); remove it to start over")
        set_peft_model_state_dict(model, state["adapter"])
        opt.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"resuming at step {start} of {total}", file=sys.stderr, flush=True)
    _trim_log(out_dir / "log.jsonl", start)
    inner = model.base_model.model  # the causal LM with the LoRA layers in place
    shared = find_shared_prompts(examples, min_tokens=s.shared_prompt_tokens if supported(inner) else 0)
    (out_dir / "settings.json").write_text(json.dumps({**asdict(s), "device": device, "dtype": dtype,
                                                       "runtime": describe_device(device), "examples": len(examples),
                                                       "tokens": sum(lengths), "steps": total,
                                                       "shared_prompts": [len(p) for p in shared.prompts],
                                                       "shared_prompt_tokens_saved": shared.shared_tokens},
                                                      indent=1) + "\n")
    runner = SharedPromptRunner(inner, shared, frozen=frozen_blocks(inner))
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    # only worth keeping when an example is seen again
    prefix = FrozenPrefixCache(inner, budget_bytes=int(s.prefix_cache_gb * 2**30) if s.epochs > 1 else 0)
    casts: dict = {}
    model.train()
    t0, last_save = time.perf_counter(), time.perf_counter()
    with (out_dir / "log.jsonl").open("a") as log:
        for step in range(start, total):
            # under CPU autocast the frozen weights are cast once a run, not once a step;
            # the casts are held through the backward, which reads them
            with ExitStack() as casting:
                logits, targets, w, cached = [], [], [], True
                with autocast:
                    casting.enter_context(cast_frozen_weights(model, torch.device(device), casts))
                    # rows beginning with the same shared prompt run together after it (once)
                    for prompt, members in _by_prompt(steps[step], shared.of):
                        cut = len(shared.prompts[prompt]) if prompt >= 0 else 0
                        ids, attn, tgt, wts = _padded([examples[i] for i in members], cut, pad, device)
                        # position p predicts token p + 1: project only the positions with a target
                        tgt, wts = tgt[:, 1:], wts[:, 1:]
                        keep = tgt != -100
                        past = runner.prompt_cache(prompt, len(members), ids.device) if cut else None
                        if cut:
                            attn = torch.cat([attn.new_ones((len(members), cut)), attn], dim=-1)
                        if prefix.covers(members):
                            hidden = prefix.forward(members, attn, past)
                        else:
                            cached = False
                            with prefix.capture(members, [len(examples[i]["input_ids"]) - cut for i in members]):
                                hidden = inner.model(input_ids=ids, attention_mask=attn, past_key_values=past,
                                                     use_cache=past is not None).last_hidden_state
                        logits.append(inner.lm_head(hidden[:, :-1][keep]).float())
                        targets.append(tgt[keep])
                        w.append(wts[keep])
                rows = [examples[i] for i in steps[step]]
                width = max(len(r["input_ids"]) for r in rows)
                logits, target, w = torch.cat(logits), torch.cat(targets), torch.cat(w)
                ce = torch.nn.functional.cross_entropy(logits, target, reduction="none")
                loss = (ce * w).sum() / w.sum()
                scaler.scale(loss).backward()
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            plain = float(ce.detach().mean())
            rec = {"step": step + 1, "of": total, "loss": round(float(loss.detach()), 4), "token_loss": round(plain, 4),
                   "rows": len(rows), "width": width, "lr": lr_at(step), "cached_prefix": cached,
                   "seconds": round(time.perf_counter() - t0, 1)}
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(f"step {step + 1}/{total}: weighted loss {rec['loss']:.3f}, token loss {plain:.3f} "
                  f"({len(rows)}×{width}, {rec['seconds']:.0f}s)", file=sys.stderr, flush=True)
            done = step + 1 == total
            over = s.max_minutes is not None and time.perf_counter() - t0 > 60 * s.max_minutes
            if done or over or time.perf_counter() - last_save > 60 * s.save_minutes:
                ckpt.mkdir(parents=True, exist_ok=True)
                torch.save({"adapter": get_peft_model_state_dict(model), "optimizer": opt.state_dict(),
                            "step": step + 1, "total": total, "settings": _identity(s)}, ckpt / "state.pt.tmp")
                (ckpt / "state.pt.tmp").replace(ckpt / "state.pt")
                last_save = time.perf_counter()
            if over:
                print(f"stopping after {s.max_minutes} minutes at step {step + 1} of {total}",
                      file=sys.stderr, flush=True)
                break
    model.to("cpu")
    model.save_pretrained(out_dir / "adapter")
    merged = model.merge_and_unload()
    merged.save_pretrained(final)
    tok.save_pretrained(final)
    return final


def train_weighted_sft_on(trajectories: Path | Sequence[Path], model: str, out_dir: Path,
                          settings: WeightedSFTSettings | None = None) -> Path:
    """:func:`train_weighted_sft` on the fully correct trajectories of one teacher file
    or several (``factrl train sft --decision-weight``); ``model`` as ``--model`` takes
    it ('smollm2', a directory, a hub id)."""
    from transformers import AutoTokenizer

    from factrl.runs.trajectories import read_trajectories
    from factrl.lm.loader import resolve_model_path
    from factrl.train.sft import select_correct

    s = settings or WeightedSFTSettings()
    files = [Path(trajectories)] if isinstance(trajectories, (str, Path)) else [Path(f) for f in trajectories]
    trajs = [t for f in files for t in read_trajectories(f)]
    keep = select_correct(trajs)
    if not keep:
        raise ValueError(f"no fully correct trajectories in {', '.join(map(str, files))}; nothing to train on")
    path = resolve_model_path(model)
    examples, skipped = weighted_examples(keep, AutoTokenizer.from_pretrained(path),
                                          decision_weight=s.decision_weight, max_length=s.max_length)
    print(f"weighted SFT: {len(examples)} examples ({sum(len(x['input_ids']) for x in examples)} tokens) from "
          f"{len(keep)} fully correct of {len(trajs)} trajectories"
          + (f" ({skipped} skipped: over max_length={s.max_length} tokens)" if skipped else ""),
          file=sys.stderr, flush=True)
    if not examples:
        raise ValueError(f"all {len(keep)} fully correct trajectories are longer than max_length={s.max_length} "
                         "tokens; raise max_length")
    return train_weighted_sft(examples, path, out_dir, s)
