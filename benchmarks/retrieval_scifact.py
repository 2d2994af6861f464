"""BM25, dense and hybrid retrieval on SciFact, and CPU corpus-encoding speed per path.

Whole abstracts are the units (``unit_sentences=0``, as in BEIR); the 809 train claims
are the queries and their ``cited_doc_ids`` the relevant documents. Reports nDCG@10 and
recall@100 per retriever, docs/s of each encoding path, and a grid of fusion settings
(the hybrid default is chosen from it).

Encoding speed is measured fairly on a shared machine: the corpus is cut into chunks and
the paths take turns chunk by chunk, so a burst of load from other processes hits every
path alike.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/retrieval_scifact.py \
        --json-out /tmp/scifact_retrieval.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from factrl.corpus import make_units, read_corpus
from factrl.retrieval.base import RETRIEVERS
from factrl.retrieval.dense import DenseRetriever, passage_text
from factrl.retrieval.encoders import TextEncoder
from factrl.retrieval.fusion import rrf, score_fusion
from factrl.retrieval.hybrid import DEFAULT_FUSION, HybridRetriever
from factrl.retrieval.metrics import doc_ranking, ndcg_at_k, recall_at_k

DATA = Path("/work/shared/data/scifact")
# name → TextEncoder settings; "plain" is sentence-transformers' own encode in float32.
PATHS = {
    "plain": {"path": "plain", "precision": "fp32"},
    "sorted-fp32": {"path": "fast", "precision": "fp32"},
    "fast": {"path": "fast", "precision": "auto"},
    "int8": {"path": "fast", "precision": "int8"},
}


def load_claims(path: Path) -> tuple[list[str], list[set[str]], int]:
    queries, relevant, skipped = [], [], 0
    with path.open(encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            row = json.loads(line)
            cited = [str(d) for d in row.get("cited_doc_ids") or []]
            if not cited:
                skipped += 1
                continue
            if not isinstance(row.get("claim"), str):
                raise ValueError(f"{path}:{line_no}: no 'claim' text")
            queries.append(row["claim"])
            relevant.append(set(cited))
    return queries, relevant, skipped


def evaluate(doc_runs: list[list[str]], relevant: list[set[str]]) -> dict[str, float]:
    return {
        "ndcg@10": float(np.mean([ndcg_at_k(r, g, 10) for r, g in zip(doc_runs, relevant)])),
        "recall@100": float(np.mean([recall_at_k(r, g, 100) for r, g in zip(doc_runs, relevant)])),
    }


def hits_to_run(hits_per_query) -> list[list[tuple[str, float]]]:
    return [[(h.passage.doc_id, h.score) for h in hits] for hits in hits_per_query]


def encode_interleaved(encoders: dict[str, TextEncoder], texts: list[str], chunks: int) -> tuple[dict, dict]:
    """Encode ``texts`` with every encoder, chunk by chunk in turn; wall and CPU seconds per encoder."""
    bounds = np.linspace(0, len(texts), chunks + 1).astype(int)
    parts: dict[str, list[np.ndarray]] = {n: [] for n in encoders}
    seconds = {n: 0.0 for n in encoders}
    cpu = {n: 0.0 for n in encoders}
    for c in range(chunks):
        chunk = texts[bounds[c] : bounds[c + 1]]
        order = list(encoders) if c % 2 == 0 else list(reversed(encoders))
        for name in order:
            t0, c0 = time.perf_counter(), time.process_time()
            parts[name].append(encoders[name].encode(chunk))
            seconds[name] += time.perf_counter() - t0
            cpu[name] += time.process_time() - c0
        done = bounds[c + 1]
        rates = ", ".join(f"{n} {done / seconds[n]:.1f}/s" for n in encoders)
        print(f"[bench] encoded {done}/{len(texts)}: {rates}", file=sys.stderr, flush=True)
    return {n: np.concatenate(p) for n, p in parts.items()}, seconds, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl")
    ap.add_argument("--claims", type=Path, default=DATA / "claims_train.jsonl")
    ap.add_argument("--work-dir", type=Path, default=None, help="where indexes are built (default: a temp dir)")
    ap.add_argument("--paths", default="plain,sorted-fp32,fast,int8", help=f"encoding paths: {','.join(PATHS)}")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--limit-docs", type=int, default=0, help="only the first N documents (smoke runs)")
    ap.add_argument("--json-out", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--reuse-embeddings", action="store_true",
                    help="read each path's corpus embeddings from an earlier run's --work-dir (no speed measurement)")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    work = args.work_dir or Path(tempfile.mkdtemp(prefix="factrl-scifact-"))
    docs = list(read_corpus(args.corpus, "scifact"))
    if args.limit_docs:
        docs = docs[: args.limit_docs]
    passages = make_units(docs, 0)
    queries, relevant, no_gold = load_claims(args.claims)
    print(f"[bench] {len(passages)} passages, {len(queries)} claims ({no_gold} without cited docs skipped)", file=sys.stderr)
    results: dict = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_start": os.getloadavg(), "command": " ".join(sys.argv),
        "n_passages": len(passages), "n_queries": len(queries), "retrievers": {}, "encoding": {}, "fusion_grid": [],
    }

    t0 = time.perf_counter()
    bm25 = RETRIEVERS.get("bm25").build(passages, work / "bm25")
    bm25_hits = bm25.search(queries, 100)
    results["retrievers"]["bm25"] = {**evaluate([doc_ranking(h) for h in bm25_hits], relevant),
                                     "seconds": time.perf_counter() - t0}

    names = [p for p in args.paths.split(",") if p]
    encoders = {n: TextEncoder(**PATHS[n]) for n in names}
    for n, enc in encoders.items():  # warm-up: first calls pay one-off costs
        enc.encode([passage_text(p) for p in passages[:16]])
        print(f"[bench] {n}: precision {enc.precision}, path {enc.path}", file=sys.stderr)
    texts = [passage_text(p) for p in passages]
    if args.reuse_embeddings:
        embs = {n: np.load(work / f"dense-{n}" / "embeddings.npy", allow_pickle=False) for n in encoders}
        secs = cpu_secs = {n: float("nan") for n in encoders}
    else:
        embs, secs, cpu_secs = encode_interleaved(encoders, texts, args.chunks)

    dense_hits = {}
    for n, enc in encoders.items():
        t0 = time.perf_counter()
        dense = DenseRetriever.build(passages, work / f"dense-{n}", embeddings=embs[n], encoder=enc, progress=False)
        dense_hits[n] = dense.search(queries, 100)
        qsec = time.perf_counter() - t0
        metrics = evaluate([doc_ranking(h) for h in dense_hits[n]], relevant)
        results["encoding"][n] = {
            "precision": enc.precision, "path": enc.path, "seconds": secs[n], "docs_per_s": len(texts) / secs[n],
            "cpu_seconds": cpu_secs[n], "docs_per_cpu_s": len(texts) / cpu_secs[n],
            "min_cosine_vs_plain": float((embs[n] * embs["plain"]).sum(1).min()) if "plain" in embs else None,
            **metrics, "query_seconds": qsec,
        }
        results["retrievers"][f"dense-{n}"] = metrics

    base = "fast" if "fast" in dense_hits else names[0]
    sparse_run, dense_run = hits_to_run(bm25_hits), hits_to_run(dense_hits[base])
    grid = [("rrf", {"k": 60.0, "depth": d}) for d in (10, 20, 50, 100)]
    grid += [("rrf", {"k": k, "depth": 100}) for k in (10.0, 30.0)]
    grid += [("score", {"norm": nm, "weights": w, "depth": 100})
             for nm in ("minmax", "zscore") for w in ((1.0, 1.0), (0.3, 0.7), (0.7, 0.3))]
    grid += [("score", {"norm": "zscore", "weights": (1.0, 1.0), "depth": d}) for d in (20, 50)]
    # Settings are compared on two halves of the claims (even / odd positions): a default
    # chosen on one half is judged on the other, not on the claims that picked it.
    halves = {"even": slice(0, None, 2), "odd": slice(1, None, 2)}
    for method, cfg in grid:
        fused = [rrf([a, b], **cfg) if method == "rrf" else score_fusion([a, b], **cfg)
                 for a, b in zip(sparse_run, dense_run)]
        runs = [[d for d, _ in f] for f in fused]
        m = evaluate(runs, relevant)
        for h, sl in halves.items():
            m[f"ndcg@10_{h}"] = evaluate(runs[sl], relevant[sl])["ndcg@10"]
        results["fusion_grid"].append({"method": method, **{k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}, **m})
    for pick, judge in (("even", "odd"), ("odd", "even")):
        best = max(results["fusion_grid"], key=lambda g: g[f"ndcg@10_{pick}"])
        results[f"best_on_{pick}"] = {**best, "judged_on": judge, "ndcg@10_judged": best[f"ndcg@10_{judge}"]}

    hybrid = HybridRetriever(bm25, DenseRetriever.build(passages, work / "hybrid-dense", embeddings=embs[base],
                                                        encoder=encoders[base], progress=False), DEFAULT_FUSION)
    t0 = time.perf_counter()
    hyb_hits = hybrid.search(queries, 100)
    results["retrievers"]["hybrid"] = {**evaluate([doc_ranking(h) for h in hyb_hits], relevant),
                                       "seconds": time.perf_counter() - t0, "settings": DEFAULT_FUSION, "dense": base}

    print("\n| retriever | nDCG@10 | recall@100 |\n|---|---|---|")
    for n, m in results["retrievers"].items():
        print(f"| {n} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} |")
    print("\n| encoding path | precision | docs/s | speed-up vs plain | docs per CPU-s | nDCG@10 | ΔnDCG@10 vs plain | min cos vs plain |\n|---|---|---|---|---|---|---|---|")
    ref = results["encoding"].get("plain")
    for n, e in results["encoding"].items():
        sp = f"{e['docs_per_s'] / ref['docs_per_s']:.2f}×" if ref else "-"
        dn = f"{e['ndcg@10'] - ref['ndcg@10']:+.4f}" if ref else "-"
        cos = f"{e['min_cosine_vs_plain']:.5f}" if e["min_cosine_vs_plain"] is not None else "-"
        print(f"| {n} | {e['precision']} | {e['docs_per_s']:.1f} | {sp} | {e['docs_per_cpu_s']:.1f} | {e['ndcg@10']:.4f} | {dn} | {cos} |")
    print("\n| fusion | settings | nDCG@10 (even half) | nDCG@10 (odd half) | nDCG@10 | recall@100 |\n|---|---|---|---|---|---|")
    for g in results["fusion_grid"]:
        cfg = {k: v for k, v in g.items() if k not in ("method", "recall@100") and not k.startswith("ndcg")}
        print(f"| {g['method']} | {cfg} | {g['ndcg@10_even']:.4f} | {g['ndcg@10_odd']:.4f} | {g['ndcg@10']:.4f} | "
              f"{g['recall@100']:.4f} |")
    for pick in ("even", "odd"):
        b = results[f"best_on_{pick}"]
        print(f"best on the {pick} half: {b['method']} {({k: v for k, v in b.items() if k in ('k', 'depth', 'norm', 'weights')})}"
              f" → nDCG@10 {b['ndcg@10_judged']:.4f} on the {b['judged_on']} half")
    results["load_average_end"] = os.getloadavg()
    print(f"\nload average start {results['load_average_start']}, end {results['load_average_end']}")
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
