"""Binary RAR's verifier against gold labels on claim–evidence pairs whose label is known.

Pairs: SciFact train claims labelled SUPPORT or CONTRADICT with their gold rationale
sentences as the evidence, and Climate-FEVER evidence sentences labelled SUPPORTS or
REFUTES with their claim (one pair per sentence). Each side is sampled balanced
(``--n`` pairs, half each label, seeded). The verifier reads (evidence, prompt, response)
with the paper's Figure 9 prompt, where the response is the claim and the prompt is a
neutral instruction (``PROMPT``); gold is 1 for SUPPORT (no contradiction) and 0 for
CONTRADICT/REFUTES.

Reported per dataset: agreement over parsed answers and over all pairs (a parse failure
counts as a disagreement there), parse failures, the false-negative rate (supported
pairs scored 0: the paper's verifier FNR, 16 % for Qwen3-32B and 30 % for Qwen3-8B) and
the contradiction recall (contradicted pairs scored 0). A verifier that always answers 1
agrees on 50 % of these balanced pairs.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/rar_verifier_agreement.py \\
        [--model smollm2] [--n 100] [--rating | --choice] [--json out.json]

``--choice`` scores the two answers of Figure 9's format as continuations instead of
generating (``verify_by_choice``; no parse failures possible). It also reports the
logprob margins (answer 1 − answer 0): their ROC AUC against gold (0.5 = no signal),
the margin that maximises agreement on each dataset, and that margin applied to the
*other* dataset (a calibration that was not fitted on the pairs it is scored on: the
``margin`` parameter of the ``rar`` reward in choice mode). ``--margin M`` scores with M.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from factrl.datasets import load_dataset
from factrl.labels import Label
from factrl.lm import GenerationConfig, load_lm
from factrl.rewards.rar_verifier import verify, verify_by_choice

PROMPT = "Tell me one fact about this topic."


def scifact_pairs(data: Path, n: int, seed: int) -> list[tuple[str, list[str], int]]:
    claims = load_dataset("scifact", data / "scifact", "train").claims
    by = {Label.SUPPORT: [], Label.REFUTE: []}
    for c in claims:
        if c.label in by and c.evidence and all(e.text for e in c.evidence):
            by[c.label].append((c.text, [e.text for e in c.evidence], int(c.label is Label.SUPPORT)))
    return _balanced(by, n, seed)


def climate_fever_pairs(data: Path, n: int, seed: int) -> list[tuple[str, list[str], int]]:
    claims = load_dataset("climate_fever", data / "climate_fever", "train").claims
    by = {Label.SUPPORT: [], Label.REFUTE: []}
    for c in claims:
        for e in c.evidence:
            lab = c.meta.get("evidence_labels", {}).get(e.id)
            if lab in ("SUPPORT", "REFUTE") and e.text:
                label = Label(lab)
                by[label].append((c.text, [f"{e.doc_id}: {e.text}"], int(label is Label.SUPPORT)))
    return _balanced(by, n, seed)


def _balanced(by: dict, n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    for label in (Label.SUPPORT, Label.REFUTE):
        items = list(by[label])
        rng.shuffle(items)
        out += items[: n // 2]
    rng.shuffle(out)
    return out


def auc(margins: list[float], gold: list[int]) -> float | None:
    """ROC AUC of the margin as a score for gold 1 (ties count half)."""
    pos = [m for m, g in zip(margins, gold) if g == 1]
    neg = [m for m, g in zip(margins, gold) if g == 0]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def agreement_at(margins: list[float], gold: list[int], t: float) -> float:
    return sum(int(m >= t) == g for m, g in zip(margins, gold)) / len(gold)


def best_margin(margins: list[float], gold: list[int]) -> tuple[float, float]:
    """The threshold (midpoints between sorted margins) with the highest agreement."""
    ms = sorted(set(margins))
    cands = [ms[0] - 1.0] + [(a + b) / 2 for a, b in zip(ms, ms[1:])] + [ms[-1] + 1.0]
    best = max(cands, key=lambda t: (agreement_at(margins, gold, t), -abs(t)))
    return best, agreement_at(margins, gold, best)


def evaluate(lm, pairs, *, rating: bool, batch: int, max_new_tokens: int, choice: bool = False,
             margin: float = 0.0) -> dict:
    t0 = time.perf_counter()
    outs = []
    cfg = GenerationConfig(max_new_tokens=max_new_tokens, temperature=0.0)
    for i in range(0, len(pairs), batch):
        rows = pairs[i : i + batch]
        args = ([PROMPT] * len(rows), [r[0] for r in rows], [r[1] for r in rows])
        outs += (verify_by_choice(lm, *args, margin=margin) if choice
                 else verify(lm, *args, rating=rating, config=cfg))
        print(f"  {len(outs)}/{len(pairs)} pairs, {time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    threshold = 5 if rating else 1  # rating: > 5 reads as "no error" (the guide's 6-10)
    parsed = [(o.score >= threshold if rating else o.score == 1, gold) for o, (_, _, gold) in zip(outs, pairs)
              if o.score is not None]
    pos = [p for p, g in parsed if g == 1]
    neg = [p for p, g in parsed if g == 0]
    agree = sum(int(p) == g for p, g in parsed)
    errors = Counter((o.error or "").split(":")[0][:40] for o in outs if o.score is None)
    extra = {}
    if choice:
        ms = [o.margin for o in outs]
        gold = [g for _, _, g in pairs]
        if all(m is not None for m in ms) and ms:
            t, acc = best_margin(ms, gold)
            extra = {"margin": margin, "margins": ms, "gold": gold, "margin_auc": auc(ms, gold),
                     "best_margin": t, "agreement_at_best_margin": acc}
    return {
        **extra,
        "pairs": len(pairs),
        "parsed": len(parsed),
        "parse_failures": len(pairs) - len(parsed),
        "parse_failure_kinds": dict(errors),
        "agreement_parsed": agree / len(parsed) if parsed else None,
        "agreement_all": agree / len(pairs) if pairs else None,
        "false_negative_rate": sum(not p for p in pos) / len(pos) if pos else None,
        "contradiction_recall": sum(not p for p in neg) / len(neg) if neg else None,
        "scores": dict(Counter(str(o.score) for o in outs)),
        "seconds": wall,
        "example_raw": [o.raw[:200] for o in outs[:3]],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--rating", action="store_true")
    ap.add_argument("--choice", action="store_true", help="score the two answers instead of generating (binary)")
    ap.add_argument("--margin", type=float, default=0.0, help="choice mode: the margin SCORE 1 needs")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    lm = load_lm(args.model)
    result = {"model": args.model, "rating": args.rating, "choice": args.choice, "n": args.n, "seed": args.seed,
              "max_new_tokens": args.max_new_tokens,
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "datasets": {}}
    for name, make in (("scifact", scifact_pairs), ("climate_fever", climate_fever_pairs)):
        pairs = make(args.data, args.n, args.seed)
        result["datasets"][name] = evaluate(lm, pairs, rating=args.rating, batch=args.batch,
                                            max_new_tokens=args.max_new_tokens, choice=args.choice,
                                            margin=args.margin)
        print(name, json.dumps(result["datasets"][name]), flush=True)
    ds = result["datasets"]
    if args.choice and all("best_margin" in d for d in ds.values()):
        # Each dataset's best margin applied to the other one: an out-of-sample calibration.
        (a, da), (b, db) = ds.items()
        result["cross_calibration"] = {
            f"{a}->{b}": {"margin": da["best_margin"], "agreement": agreement_at(db["margins"], db["gold"], da["best_margin"])},
            f"{b}->{a}": {"margin": db["best_margin"], "agreement": agreement_at(da["margins"], da["gold"], db["best_margin"])},
        }
        print("cross_calibration", json.dumps(result["cross_calibration"]), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
