"""Can the embedded model learn the judgement from label-only supervision? A pilot.

The agent's warm-up learned the protocol and a label prior, not the judgement (the
``probe`` stage of ``factrl train embedded-agent``). This pilot asks whether the judgement itself
is learnable at this scale: LoRA on the label tokens only (the loss sits on the label
after ``<answer> Label:``), on short offline prompts (the agent's own prompt with the
gold sentences and ``--context`` other sentences of the cited documents), label-balanced
training claims of the split of ``factrl train embedded-agent``. Before and after, on the held-out
claims: accuracy of the label the model finds most probable, raw and contextually
calibrated (each label's mean log-probability over the claims subtracted), on the short
prompts and on the agent's 6-sentence offline prompts.

    python benchmarks/judgement_drill.py --out runs/agent3 --model runs/agent3/sft/final --per-label 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from factrl.lm.label_scores import label_continuations  # noqa: E402
from factrl.recipes.embedded_agent import EmbeddedAgentSettings  # noqa: E402
from factrl.recipes.embedded_agent.probe import label_probe  # noqa: E402
from factrl.recipes.embedded_agent.settings import DEFAULT_INDEX  # noqa: E402
from factrl.recipes.embedded_agent.stages import make_env, splits  # noqa: E402

# The shipped agent's own parameters (its manifest's).
AGENT = EmbeddedAgentSettings(agent_param_items=["prompt=short", "max_observation_chars=1200"])


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def prompts(lm, claims, index, sentences: int) -> list[list[int]]:
    """The agent's offline prompt of each claim (``sentences`` context sentences plus the
    gold ones), as token ids ending in ``<answer> Label:``."""
    from factrl.forced import ANSWER_OPENING

    env = make_env(AGENT, "offline", index, sentences)()
    return [lm.chat_prompt_ids(env.reset(c)) + lm.encode(ANSWER_OPENING) for c in claims]


def train(lm, ctxs, gold, *, lr: float, batch: int, rank: int, seed: int) -> dict:
    """LoRA on the label tokens only; returns the losses and the time."""
    import random

    import torch
    from peft import LoraConfig, get_peft_model

    from factrl.forced import LABELS

    choices = dict(zip(LABELS, label_continuations(lm, [lab.value for lab in LABELS])))
    torch.manual_seed(seed)
    model = get_peft_model(lm.model, LoraConfig(
        r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM",
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    order = list(range(len(ctxs)))
    random.Random(seed).shuffle(order)
    model.train()
    losses, t0 = [], time.perf_counter()
    for step, start in enumerate(range(0, len(order), batch)):
        rows = [(ctxs[i], choices[gold[i]]) for i in order[start:start + batch]]
        width = max(len(c) + len(t) for c, t in rows)
        ids = torch.full((len(rows), width), lm.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        for b, (c, t) in enumerate(rows):  # right padding: every real token first
            seq = c + t
            ids[b, :len(seq)] = torch.tensor(seq)
            attn[b, :len(seq)] = 1
            labels[b, len(c):len(seq)] = torch.tensor(t)
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(round(float(loss), 4))
        _say(f"step {step + 1}: loss {losses[-1]:.3f} ({time.perf_counter() - t0:.0f}s)")
    lm.model = model.merge_and_unload()
    lm.model.eval()
    return {"losses": losses, "seconds": round(time.perf_counter() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("runs/agent3"), help="a factrl train embedded-agent run (its splits)")
    ap.add_argument("--model", default="factrl-agent")
    ap.add_argument("--per-label", type=int, default=60, help="training claims per label")
    ap.add_argument("--context", type=int, default=2, help="other sentences beside the gold ones (training)")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from factrl.datasets.sampling import interleave_labels
    from factrl.lm.loader import load_lm
    from factrl.retrieval.index import load_index

    train_claims, held = splits(args.out, "scifact")
    by_label: dict = {}
    for c in interleave_labels(train_claims, seed=args.seed):
        if len(by_label.setdefault(c.label, [])) < args.per_label:
            by_label[c.label].append(c)
    taught = [c for cs in by_label.values() for c in cs]
    index = load_index(DEFAULT_INDEX["scifact"])
    lm = load_lm(args.model)
    held_gold = [c.label for c in held]
    evals = {"short": prompts(lm, held, index, args.context), "agent": prompts(lm, held, index, 6)}
    result: dict = {"model": args.model, "args": {k: str(v) for k, v in vars(args).items()},
                    "n_train": len(taught), "n_held_out": len(held)}
    result["before"] = {k: label_probe(lm, v, held_gold) for k, v in evals.items()}
    _say(f"before: {json.dumps(result['before'])}")
    ctxs = prompts(lm, taught, index, args.context)
    result["train_tokens"] = sum(len(c) for c in ctxs)
    result["training"] = train(lm, ctxs, [c.label for c in taught], lr=args.lr, batch=args.batch,
                               rank=args.rank, seed=args.seed)
    result["after"] = {k: label_probe(lm, v, held_gold) for k, v in evals.items()}
    dest = args.out / f"judgement_drill-{args.per_label}.json"
    dest.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("before", "after")}, indent=1))
    _say(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
