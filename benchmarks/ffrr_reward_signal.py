"""Does the frozen LM's reward point at relevant documents? (FFRR, before any training.)

FFRR's document-level reward is the scorer's probability of the claim's gold label given
the claim and one candidate document (``scorer.reward = "label"``, the paper's), or with
``--set scorer.reward=claim_likelihood`` the LM's mean log-likelihood of the claim after
the document. Training can only move the retriever towards
relevant documents if, among a claim's candidates D′ (the frozen index's top
``ffrr.candidates``), the relevant ones (SciFact's cited documents) get higher rewards
than the others. This script scores every (claim, candidate) pair of some training
claims into the run's persistent score cache (so a later ``factrl train ffrr`` with the
same scorer reuses every row) and prints, per gold label:

* coverage — claims with at least one relevant document among the candidates;
* reward AUC — P(reward of a relevant candidate > reward of an irrelevant one), over the
  claims with both (0.5: no signal; ties count half);
* retriever AUC — the same with the frozen retriever's own scores (what training must beat);
* top-1 relevant — the reward's argmax candidate is relevant, vs the retriever's top 1.

    python benchmarks/ffrr_reward_signal.py --index runs/scifact-hybrid \\
        --work-dir runs/ffrr_signal --claims 120
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import defaultdict
from pathlib import Path


def auc(pos: list[float], neg: list[float]) -> float:
    """P(pos > neg) with ties as half."""
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def mean_ci(xs: list[float]) -> tuple[float, float]:
    if not xs:
        return math.nan, math.nan
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, math.nan
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, 1.96 * sd / math.sqrt(len(xs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True)
    ap.add_argument("--work-dir", required=True, help="run directory: split and lm_scores.jsonl live here")
    ap.add_argument("--preset", default="ffrr_cpu")
    ap.add_argument("--claims", type=int, default=120, help="training claims, evenly spaced (0: all)")
    ap.add_argument("--set", action="append", default=[], help="config override KEY=VALUE")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()

    import torch

    from factrl.datasets.prepare import prepare_splits
    from factrl.retrieval.index import load_index
    from factrl.train.config import parse_overrides
    from factrl.train.ffrr.config import load_ffrr_config
    from factrl.train.ffrr.episodes import Candidates
    from factrl.train.ffrr.evaluate import relevant_docs
    from factrl.train.ffrr.trainer import (_frozen_retriever, gold_index, load_scorer, open_score_cache,
                                           precompute_scores)

    torch.set_num_threads(args.threads)
    cfg = load_ffrr_config(args.preset, {"retriever.index": args.index, "output_dir": args.work_dir,
                                         **parse_overrides(args.set)})
    train, _ = prepare_splits(cfg.data, Path(args.work_dir))
    claims = [(c, g) for c in train if (g := gold_index(c, cfg)) is not None and relevant_docs(c)]
    if args.claims and len(claims) > args.claims:
        step = len(claims) / args.claims
        claims = [claims[int(i * step)] for i in range(args.claims)]
    index = load_index(cfg.retriever.index)
    cands = Candidates(_frozen_retriever(index), cfg.ffrr.candidates)
    scores = open_score_cache(cfg, load_scorer(cfg, reward=True))
    at = {g: 0 for g in range(len(cfg.scorer.label_words))} if cfg.scorer.reward == "claim_likelihood" else None
    t0 = time.perf_counter()
    precompute_scores(cands, scores, [c for c, _ in claims], {})
    seconds = time.perf_counter() - t0

    labels = list(cfg.scorer.label_words)
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c, g in claims:
        hits = cands.retriever.search([c.text], cfg.ffrr.candidates)[0]
        rel = set(relevant_docs(c))
        flags = [h.passage.doc_id in rel for h in hits]
        rewards = [scores.one(c.text, [h.passage])[g if at is None else at[g]] for h in hits]
        ret = [float(h.score) for h in hits]
        row = per[labels[g]]
        row["covered"].append(float(any(flags)))
        row["mean_reward"].append(sum(rewards) / len(rewards))
        if any(flags) and not all(flags):
            pos = [r for r, f in zip(rewards, flags) if f]
            neg = [r for r, f in zip(rewards, flags) if not f]
            row["reward_auc"].append(auc(pos, neg))
            row["retriever_auc"].append(auc([s for s, f in zip(ret, flags) if f],
                                            [s for s, f in zip(ret, flags) if not f]))
            row["reward_top1"].append(float(flags[max(range(len(rewards)), key=rewards.__getitem__)]))
            row["retriever_top1"].append(float(flags[0]))
    result = {"claims": len(claims), "candidates": cfg.ffrr.candidates, "scorer": cfg.scorer.model,
              "reward": cfg.scorer.reward,
              "form": cfg.scorer.form, "label_words": cfg.scorer.label_words, "score_seconds": round(seconds, 1),
              "lm_rows_scored": scores.lm_rows, "per_label": {}}
    print(f"{len(claims)} claims, {cfg.ffrr.candidates} candidates each; {scores.lm_rows} LM rows scored "
          f"in {seconds:.0f} s")
    print(f"{'label':<16} {'n':>4} {'covered':>8} {'mean r':>7} {'reward AUC':>16} {'retriever AUC':>16} "
          f"{'top1 rel (r/ret)':>17}")
    for lab in labels:
        row = per.get(lab)
        if not row:
            continue
        fig = {k: mean_ci(v) for k, v in row.items()}
        result["per_label"][lab] = {k: {"mean": m, "ci95": h, "n": len(row[k])} for k, (m, h) in fig.items()}
        print(f"{lab:<16} {len(row['covered']):>4} {fig['covered'][0]:>8.3f} {fig['mean_reward'][0]:>7.3f} "
              f"{fig['reward_auc'][0]:>9.3f}±{fig['reward_auc'][1]:.3f} "
              f"{fig['retriever_auc'][0]:>9.3f}±{fig['retriever_auc'][1]:.3f} "
              f"{fig['reward_top1'][0]:>8.3f}/{fig['retriever_top1'][0]:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
