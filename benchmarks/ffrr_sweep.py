"""FFRR settings chosen on validation claims, never on the held-out ones.

Trains ``ffrr_cpu`` once per setting (``--try NAME KEY=VALUE ...``) on the training
claims of a ``benchmarks/ffrr_scifact.py`` work directory (its ``split`` and, with
``scorer.cache``, its precomputed LM scores, so a setting costs encoder updates only)
and scores retrieval (dense and hybrid nDCG@10 / recall@10, no LM) on *validation*
claims: the training part of the full split that ``data.limit`` left out. The frozen
encoder is scored on the same claims first. Pick a setting here, then run it once with
``ffrr_scifact.py`` for the held-out figures.

    python benchmarks/ffrr_sweep.py --work-dir runs/ffrr_bench --set ... \\
        --try lr5e-5 ffrr.learning_rate=5e-5 --try steps500 ffrr.max_steps=500
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default="runs/scifact-hybrid")
    ap.add_argument("--data-dir", default="../shared/data/scifact")
    ap.add_argument("--work-dir", required=True, help="an ffrr_scifact.py work directory (has split/)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override for every setting")
    ap.add_argument("--try", dest="tries", action="append", nargs="+", default=[], metavar="NAME [KEY=VALUE ...]")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reuse", action="store_true", help="evaluate a setting's saved final/ instead of training again")
    args = ap.parse_args()

    import torch

    from factrl.datasets.prepare import HELD_OUT_IDS, TRAIN_IDS, prepare_splits
    from factrl.metrics.significance import paired_by_id
    from factrl.retrieval.index import load_index
    from factrl.train.config import parse_overrides
    from factrl.train.ffrr.config import load_ffrr_config
    from factrl.train.ffrr.evaluate import evaluate_retriever
    from factrl.train.ffrr.trainer import train_ffrr

    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    sweep = work / "sweep"
    base = {"retriever.index": args.index, "data.data_dir": args.data_dir, **parse_overrides(args.set)}
    cfg0 = load_ffrr_config("ffrr_cpu", {**base, "output_dir": str(sweep / "frozen"), "ffrr.method": "frozen"})
    limited, _ = prepare_splits(cfg0.data, work / "split")
    full, held = prepare_splits(replace(cfg0.data, limit=None), sweep / "full-split")
    if {c.id for c in held} != set((work / "split" / HELD_OUT_IDS).read_text().split()):
        raise SystemExit("the full split's held-out part differs from the work directory's; same data settings?")
    used = {c.id for c in limited}
    validation = [c for c in full if c.id not in used]
    print(f"{len(limited)} training claims, {len(validation)} validation claims (held-out claims untouched)")
    index = load_index(cfg0.retriever.index)
    rows = []
    for name, *sets in [["frozen", "ffrr.method=frozen"], *args.tries]:
        out = sweep / name
        cfg = load_ffrr_config("ffrr_cpu", {**base, **parse_overrides(sets), "output_dir": str(out)})
        out.mkdir(parents=True, exist_ok=True)
        for fname in (TRAIN_IDS, HELD_OUT_IDS):
            shutil.copy(work / "split" / fname, out / fname)
        t0 = time.perf_counter()
        if args.reuse and (out / "final" / "modules.json").is_file() and (out / "summary.json").is_file():
            final = out / "final"
            seconds = json.loads((out / "summary.json").read_text()).get("train_seconds", 0.0)
        else:
            final = train_ffrr(cfg)
            seconds = time.perf_counter() - t0
        ev = evaluate_retriever(final, cfg, validation, index=index, labels=False)
        row = {"name": name, "sets": sets, "train_s": round(seconds, 1), "dense": ev["dense"], "hybrid": ev.get("hybrid"),
               "per_query": ev["per_query"]}
        if rows:  # paired sign-flip test of per-query nDCG@10 against the frozen encoder
            row["vs_frozen"] = {side: paired_by_id(ev["per_query"][side]["ndcg@10"], rows[0]["per_query"][side]["ndcg@10"])
                                for side in ev["per_query"]}
        rows.append(row)
        with (sweep / "results.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        vs = "".join(f"  {side} p={t['p']:.3g} ({t['wins']:.0f}+/{t['losses']:.0f}-)" for side, t in row.get("vs_frozen", {}).items())
        print(f"{name:<16} dense nDCG@10 {ev['dense']['ndcg@10']:.4f} R@10 {ev['dense']['recall@10']:.4f}  "
              f"hybrid nDCG@10 {ev['hybrid']['ndcg@10']:.4f} R@10 {ev['hybrid']['recall@10']:.4f}  "
              f"({seconds:.0f} s){vs}", flush=True)


if __name__ == "__main__":
    main()
