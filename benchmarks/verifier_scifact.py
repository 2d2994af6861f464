"""The trained verifier on SciFact and its scoring speed (docs/benchmarks.md, "The verifier").

``agent``: the ``retrieve_verify`` agent, online with BM25 over the SciFact corpus, on the
verifier's held-out SciFact claims (the claim groups its training never saw; CONFLICTING
claims, with no three-way label, are left out): label accuracy with a Wilson 95 %
interval, per-label recall with intervals, macro-F1, gold-evidence hits, seconds per
claim. The agent decides at the verifier's agent thresholds where its manifest has them,
else at its pair thresholds (``--pair-thresholds`` forces those; the report gives both).
``--tune`` picks the two aggregation thresholds on the *validation* claims (grid, best
accuracy) and reports held-out figures with them; ``--record FOLDER`` writes them into
that verifier's manifest as its agent thresholds.

``aggregation``: what else the agent could read and how it could decide, chosen on the
validation claims only: the top 1–5 units' sentences, adjacent two-sentence windows and
whole units (and their unions) scored once against the claim, each with the verifier's
thresholds and with thresholds tuned on validation; the held-out accuracy of each, and of
the one validation picks.

``speed``: batched scoring throughput on held-out SciFact and Climate-FEVER pairs, fp32,
bf16 and int8 (``--precisions``), at 1 and 2 torch threads (pairs per wall-clock second,
and per CPU-second of the process, which a shared machine's wall clock does not show), and
each precision's label agreement with fp32.

    nice -n 19 env OMP_NUM_THREADS=1 PYTHONPATH=src python benchmarks/verifier_scifact.py agent \\
        --index runs/scifact-index --top-k 3 --tune --json runs/verifier/agent.json
    nice -n 19 env PYTHONPATH=src python benchmarks/verifier_scifact.py speed --json runs/verifier/speed.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any


def _claims(data_dir: Path, split: str) -> list[Any]:
    from factrl.datasets import load_dataset
    from factrl.verifier.pairs import SplitFractions
    from factrl.verifier.sources import SciFactPairs

    pairs = SciFactPairs().pairs(data_dir, SplitFractions())
    ids = {p.claim_id for p in pairs if p.split == split}
    claims = load_dataset("scifact", data_dir / "scifact", "train").claims
    return [c for c in claims if c.id in ids]


def _run(claims: list[Any], index: Any, verifier: Any, params: dict[str, Any]) -> list[Any]:
    from factrl.envs import EnvDeps, EnvSpec, env_factory
    from factrl.lm.scripted import null_lm
    from factrl.rollout import RolloutConfig, run_episodes

    make_env = env_factory(EnvSpec(name="retrieve_verify", params=params),
                           EnvDeps(retriever=index, lms={"verifier": verifier}))
    return run_episodes(make_env, claims, null_lm(), RolloutConfig(temperature=0.0, max_new_tokens=2, batch_size=1),
                        score=False)


def _summary(claims: list[Any], trajs: list[Any]) -> dict[str, Any]:
    from factrl.labels import Label
    from factrl.metrics.classification import macro_f1
    from factrl.metrics.significance import wilson_interval

    gold = [c.label for c in claims]
    pred = [t.verdict.label for t in trajs]
    right = sum(g == p for g, p in zip(gold, pred))
    recall = {}
    for label in (Label.SUPPORT, Label.REFUTE, Label.NEI):
        n = sum(g == label for g in gold)
        k = sum(g == label and p == label for g, p in zip(gold, pred))
        recall[label.value] = {"recall": k / n if n else None, "ci95": list(wilson_interval(k, n)) if n else None,
                               "n": n, "predicted": sum(p == label for p in pred)}
    hits = [bool(set(t.verdict.evidence_ids) & set(c.evidence_ids)) for c, t in zip(claims, trajs)
            if c.label in (Label.SUPPORT, Label.REFUTE) and t.verdict.label == c.label]
    seconds = [t.timings.get("search_s", 0.0) + t.timings.get("verify_s", 0.0) for t in trajs]
    return {"n": len(claims), "accuracy": right / len(claims), "accuracy_ci95": list(wilson_interval(right, len(claims))),
            "macro_f1": macro_f1(gold, pred, [Label.SUPPORT, Label.REFUTE, Label.NEI]), "per_label": recall,
            "correct_with_gold_evidence": (sum(hits) / len(hits)) if hits else None,
            "seconds_per_claim": {"mean": statistics.mean(seconds), "median": statistics.median(seconds),
                                  "p95": sorted(seconds)[int(0.95 * (len(seconds) - 1))]},
            "errors": sum(t.error is not None for t in trajs)}


def _relabel(trajs: list[Any], support: float, refute: float, units: int | None = None) -> list[Any]:
    """The verdicts the same scored sentences give under other thresholds, or (``units``)
    from the sentences of the first ``units`` retrieved units only (no rescoring)."""
    import numpy as np

    from factrl.verifier.judge import aggregate_verdict
    from factrl.verifier.scoring import Thresholds

    out = []
    for t in trajs:
        scored = t.meta.get("scored", [])
        if units is not None:
            keep = set(t.retrieved_ids[:units])
            scored = [s for s in scored if s.get("unit") in keep]
        probs = np.array([[s["support"], s["refute"], s["nei"]] for s in scored]).reshape(-1, 3)
        v = aggregate_verdict(probs, [s["id"] for s in scored], Thresholds(support, refute))
        c = t.model_copy(deep=True)
        c.verdict = c.verdict.model_copy(update={"label": v.label, "evidence_ids": v.evidence_ids})
        out.append(c)
    return out


def agent(args: argparse.Namespace) -> dict[str, Any]:
    from factrl.retrieval.index import load_index
    from factrl.verifier.asset import load_verifier

    index = load_index(args.index)
    verifier = load_verifier(args.verifier, precision=args.precision)
    params = {"top_k": args.top_k, "granularity": args.granularity, "verifier": args.verifier,
              "precision": args.precision, "with_title": args.with_title}
    pair = verifier.thresholds
    if args.pair_thresholds:  # as before agent thresholds existed
        params.update(support_threshold=pair.support, refute_threshold=pair.refute)
    held = _claims(args.data_dir, "held_out")
    report: dict[str, Any] = {"verifier": verifier.info(), "params": params, "split": "held_out"}
    t0 = time.perf_counter()
    trajs = _run(held, index, verifier, params)
    report["wall_s"] = time.perf_counter() - t0
    used = (verifier.agent_thresholds if verifier.agent_thresholds and not args.pair_thresholds else pair)
    report["own_thresholds"] = {"thresholds": {"support": used.support, "refute": used.refute},
                                "which": "pair" if used is pair else "agent", **_summary(held, trajs)}
    report["pair_thresholds"] = _summary(held, _relabel(trajs, pair.support, pair.refute))
    if args.tune:
        val = _claims(args.data_dir, "validation")
        vtrajs = _run(val, index, verifier, params)
        grid = [round(x, 2) for x in [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]]
        best = max(itertools.product(grid, grid),
                   key=lambda st: (_summary(val, _relabel(vtrajs, *st))["accuracy"], st))
        report["tuned_on_validation"] = {"thresholds": {"support": best[0], "refute": best[1]},
                                         "validation": _summary(val, _relabel(vtrajs, *best)),
                                         "held_out": _summary(held, _relabel(trajs, *best))}
        # fewer units: the first m units' sentences of the same run (seconds not re-measured)
        own = verifier.thresholds
        report["fewer_units"] = {}
        for m in range(1, args.top_k):
            tuned = max(itertools.product(grid, grid),
                        key=lambda st: (_summary(val, _relabel(vtrajs, *st, units=m))["accuracy"], st))
            report["fewer_units"][m] = {
                "own": _summary(held, _relabel(trajs, own.support, own.refute, units=m))["accuracy"],
                "tuned_thresholds": list(tuned),
                "tuned_validation": _summary(val, _relabel(vtrajs, *tuned, units=m))["accuracy"],
                "tuned_held_out": _summary(held, _relabel(trajs, *tuned, units=m))["accuracy"]}
        if args.record:
            from factrl.verifier.asset import record_agent_thresholds
            from factrl.verifier.scoring import Thresholds

            how = {"chosen_on": f"SciFact validation claims ({len(val)}), best accuracy on a grid",
                   "grid": grid, "validation_accuracy": report["tuned_on_validation"]["validation"]["accuracy"],
                   "top_k": args.top_k, "granularity": args.granularity, "with_title": args.with_title,
                   "index": str(args.index), "command": "benchmarks/verifier_scifact.py agent --tune --record"}
            record_agent_thresholds(Path(args.record), Thresholds(*best), how)
            report["recorded_in"] = str(args.record)
    return report


GRANULARITIES = {"s": "sentences", "w": "two-sentence windows", "u": "whole units"}


def _score_units(claims: list[Any], index: Any, verifier: Any, top_k: int) -> list[dict[str, Any]]:
    """Per claim, its top ``top_k`` units, each read as sentences, adjacent two-sentence
    windows and the whole unit: ``{"label", "units": [{"kinds", "probs"}]}``."""
    rows = []
    for c in claims:
        units = []
        for h in index.search([c.text.strip()[:500]], top_k)[0]:
            p = h.passage
            sents = list(p.sentences or [p.text])
            texts = sents + [" ".join(sents[i:i + 2]) for i in range(len(sents) - 1)] + [p.text]
            kinds = ["s"] * len(sents) + ["w"] * (len(sents) - 1) + ["u"]
            units.append({"kinds": kinds, "probs": verifier.predict([c.text] * len(texts), texts).tolist()})
        rows.append({"label": c.label, "units": units})
    return rows


def _rule_accuracy(rows: list[dict[str, Any]], kinds: str, units: int, support: float, refute: float) -> float:
    import numpy as np

    from factrl.verifier.judge import aggregate_verdict
    from factrl.verifier.scoring import Thresholds

    right = 0
    for r in rows:
        probs = [pr for u in r["units"][:units] for k, pr in zip(u["kinds"], u["probs"]) if k in kinds]
        arr = np.array(probs).reshape(-1, 3)
        right += aggregate_verdict(arr, [str(i) for i in range(len(arr))], Thresholds(support, refute)).label == r["label"]
    return right / len(rows)


def aggregation(args: argparse.Namespace) -> dict[str, Any]:
    from factrl.metrics.significance import wilson_interval
    from factrl.retrieval.index import load_index
    from factrl.verifier.asset import load_verifier

    index = load_index(args.index)
    verifier = load_verifier(args.verifier, precision=args.precision)
    own = (verifier.thresholds.support, verifier.thresholds.refute)
    rows = {split: _score_units(_claims(args.data_dir, split), index, verifier, args.max_units)
            for split in ("validation", "held_out")}
    grid = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    rules = []
    for kinds in ("s", "w", "u", "sw", "su", "wu", "swu"):
        for m in range(1, args.max_units + 1):
            tuned = max(itertools.product(grid, grid),
                        key=lambda st: (_rule_accuracy(rows["validation"], kinds, m, *st), st))
            for name, th in (("own", own), ("tuned", tuned)):
                rules.append({"read": "+".join(GRANULARITIES[k] for k in kinds), "units": m, "thresholds": name,
                              "support": th[0], "refute": th[1],
                              "validation": _rule_accuracy(rows["validation"], kinds, m, *th),
                              "held_out": _rule_accuracy(rows["held_out"], kinds, m, *th)})
    # validation picks; ties go to the agent's default reading (sentences, 3 units, own thresholds)
    default = {"read": "sentences", "units": 3, "thresholds": "own"}
    pick = max(rules, key=lambda r: (r["validation"], all(r[k] == v for k, v in default.items())))
    n = len(rows["held_out"])
    pick["held_out_ci95"] = list(wilson_interval(round(pick["held_out"] * n), n))
    return {"verifier": verifier.info(), "claims": {k: len(v) for k, v in rows.items()}, "picked_on_validation": pick,
            "default": next(r for r in rules if all(r[k] == v for k, v in default.items())), "rules": rules}


def speed(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch

    from factrl.verifier.asset import load_verifier
    from factrl.verifier.pairs import SplitFractions, build_pairs

    pairs = [p for p in build_pairs(args.data_dir, ["scifact", "climate_fever"], SplitFractions())
             if p.split == "held_out"][: args.pairs]
    claims, evidence = [p.claim for p in pairs], [p.evidence for p in pairs]
    out: dict[str, Any] = {"pairs": len(pairs), "mean_tokens": None, "runs": []}
    ref = None
    for precision in args.precisions:
        v = load_verifier(args.verifier, precision=precision)
        if out["mean_tokens"] is None:
            enc = v.tokenizer(claims, evidence, truncation="longest_first", max_length=v.max_length)
            out["mean_tokens"] = float(np.mean([len(x) for x in enc["input_ids"]]))
        for threads in args.threads:
            torch.set_num_threads(threads)
            v.predict(claims[:32], evidence[:32])  # warm-up
            t0, c0 = time.perf_counter(), time.process_time()
            probs = v.predict(claims, evidence)
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            # wall-clock throughput, and per CPU-second of this process (what the scoring
            # gets from the cores it is given: the figure an idle box's core reaches when the
            # machine is shared and the wall clock counts other jobs' time)
            row = {"precision": precision, "threads": threads, "pairs_per_s": len(pairs) / dt, "seconds": dt,
                   "cpu_seconds": cpu, "pairs_per_cpu_s": len(pairs) / cpu if cpu > 0 else None,
                   "load_avg_1m": os.getloadavg()[0]}
            if precision == "fp32" and ref is None:
                ref = probs.argmax(1)
            elif ref is not None:
                row["label_agreement_with_fp32"] = float((probs.argmax(1) == ref).mean())
            out["runs"].append(row)
            print(json.dumps(row), flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("agent", "aggregation", "speed"))
    ap.add_argument("--verifier", default="factrl-verifier")
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--index", type=Path, default=Path("runs/scifact-index"))
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--granularity", default="sentence")
    ap.add_argument("--precision", default="auto", help="the agent's scoring precision (auto: bf16 where native)")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "int8"], help="speed: the precisions timed")
    ap.add_argument("--tune", action="store_true")
    ap.add_argument("--pair-thresholds", action="store_true", help="agent: decide at the verifier's pair "
                    "thresholds even where it has agent thresholds")
    ap.add_argument("--record", type=Path, help="agent --tune: write the thresholds validation picks into this "
                    "verifier folder's manifest as its agent thresholds")
    ap.add_argument("--with-title", action="store_true", help="agent: each scored sentence after its abstract's "
                    "title (for verifiers trained on scifact_titled)")
    ap.add_argument("--max-units", type=int, default=5, help="aggregation: units read, 1 to this")
    ap.add_argument("--pairs", type=int, default=512)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    report = {"agent": agent, "aggregation": aggregation, "speed": speed}[args.what](args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
