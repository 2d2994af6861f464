"""FFRR vs REPLUG vs frozen on SciFact with the embedded models (CPU).

Train on part of the SciFact train claims, evaluate on the held-out part: nDCG@10 and
recall@10 of the retriever (dense, and hybrid with the index's BM25) over the whole
SciFact corpus, and macro-F1 of the embedded SmolLM2's argmax label given the top-3
documents. Every method runs the ``ffrr_cpu`` preset with the same split, index, scorer
and time budget; ``--method`` runs one (so two can run side by side), ``--report`` joins
the per-method JSON files into one table.

    python benchmarks/ffrr_scifact.py --index runs/scifact-hybrid --work-dir /tmp/ffrr \\
        --method ffrr --minutes 15
    python benchmarks/ffrr_scifact.py --work-dir /tmp/ffrr --report
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import time
from pathlib import Path

METHODS = ("frozen", "replug", "ffrr")


def run(args: argparse.Namespace) -> None:
    import torch

    from factrl.datasets.prepare import HELD_OUT_IDS, TRAIN_IDS, prepare_splits
    from factrl.train.ffrr.config import load_ffrr_config
    from factrl.train.ffrr.evaluate import evaluate_retriever
    from factrl.train.ffrr.trainer import train_ffrr

    torch.set_num_threads(args.threads)
    work = Path(args.work_dir)
    name = args.name or args.method
    out = work / name
    from factrl.train.config import parse_overrides

    overrides = {"retriever.index": args.index, "output_dir": str(out), "ffrr.method": args.method,
                 "ffrr.max_minutes": args.minutes, "data.data_dir": args.data_dir, **parse_overrides(args.set)}
    cfg = load_ffrr_config("ffrr_cpu", overrides)
    # one split for every method: written once under work/split, copied into each run
    split = work / "split"
    prepare_splits(cfg.data, split)
    out.mkdir(parents=True, exist_ok=True)
    for fname in (TRAIN_IDS, HELD_OUT_IDS):
        shutil.copy(split / fname, out / fname)
    _, held_out = prepare_splits(cfg.data, out)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if args.eval_only:  # evaluate the final/ of an earlier run of this method
        final = out / "final"
        timing_file = work / f"{name}.train.json"
        if timing_file.is_file():
            timing = json.loads(timing_file.read_text())
            train_wall, train_cpu = timing["train_wall_s"], timing["train_cpu_s"]
        else:  # only the trainer's own wall time is known
            train_wall, train_cpu = json.loads((out / "summary.json").read_text()).get("train_seconds", 0.0), None
    else:
        final = train_ffrr(cfg)
        train_wall, train_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        (work / f"{name}.train.json").write_text(json.dumps(
            {"train_wall_s": round(train_wall, 1), "train_cpu_s": round(train_cpu, 1)}) + "\n")
    wall1, cpu1 = time.perf_counter(), time.process_time()
    ev = evaluate_retriever(final, cfg, held_out)
    summary = json.loads((out / "summary.json").read_text())
    result = {"method": args.method, "name": name, "sets": args.set, "minutes_budget": args.minutes,
              "train_wall_s": round(train_wall, 1),
              "train_cpu_s": None if train_cpu is None else round(train_cpu, 1), "eval_wall_s": round(time.perf_counter() - wall1, 1),
              "eval_cpu_s": round(time.process_time() - cpu1, 1), "summary": summary, "eval": ev,
              "machine": f"{platform.processor() or platform.machine()}, torch threads {args.threads}",
              "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    (work / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def report(work: Path, args_names: list[str] | None = None) -> None:
    names = args_names or [m for m in METHODS if (work / f"{m}.json").is_file()]
    rows = [json.loads((work / f"{m}.json").read_text()) for m in names]
    print("| method | updates | s / update | train wall / CPU (s) | dense nDCG@10 | dense recall@10 "
          "| hybrid nDCG@10 | hybrid recall@10 | label macro-F1 | accuracy | predicted |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        s, e = r["summary"], r["eval"]
        d, h, lab = e["dense"], e.get("hybrid", {}), e["labels"]
        steps = s.get("steps", 0)
        per = f"{s['seconds_per_step']:.1f}" if steps else "—"
        cpu = "—" if r["train_cpu_s"] is None else f"{r['train_cpu_s']:.0f}"
        print(f"| {r.get('name', r['method'])} | {steps} | {per} | {r['train_wall_s']:.0f} / {cpu} "
              f"| {d['ndcg@10']:.4f} | {d['recall@10']:.4f} | {h.get('ndcg@10', float('nan')):.4f} "
              f"| {h.get('recall@10', float('nan')):.4f} | {lab['macro_f1']:.4f} | {lab['accuracy']:.4f} "
              f"| {lab['predicted']} |")
    frozen = next((r for r in rows if r["method"] == "frozen"), None)
    if frozen and "per_query" in frozen["eval"]:
        from factrl.metrics.significance import paired_by_id

        print()
        for r in rows:
            if r is frozen or "per_query" not in r["eval"]:
                continue
            for side, pq in r["eval"]["per_query"].items():
                t = paired_by_id(pq["ndcg@10"], frozen["eval"]["per_query"][side]["ndcg@10"])
                print(f"- {r.get('name', r['method'])} vs frozen, {side} nDCG@10: {t['mean_diff']:+.4f} over {t['n']:.0f} queries "
                      f"({t['wins']:.0f} better, {t['losses']:.0f} worse), paired sign-flip p = {t['p']:.3g}")
    if rows:
        print(f"\nheld-out claims: {rows[0]['eval']['n_claims']} (retrieval over "
              f"{int(rows[0]['eval']['dense']['n_queries'])} with cited documents; labels over "
              f"{rows[0]['eval']['labels']['n']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", default="runs/scifact-hybrid", help="frozen hybrid (or dense) index, whole abstracts")
    ap.add_argument("--data-dir", default="../shared/data/scifact")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--method", choices=METHODS)
    ap.add_argument("--name", help="run name (default: the method), so variants of a method sit side by side")
    ap.add_argument("--names", help="--report: the runs to join, comma-separated (default: the three methods)")
    ap.add_argument("--minutes", type=float, default=15.0, help="training budget per method")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--eval-only", action="store_true", help="evaluate WORK/METHOD/final without training")
    args = ap.parse_args()
    if args.report:
        report(Path(args.work_dir), args.names.split(",") if args.names else None)
    elif args.method:
        run(args)
    else:
        ap.error("give --method or --report")


if __name__ == "__main__":
    main()
