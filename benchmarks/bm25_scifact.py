"""BM25 on SciFact: factrl's bm25s index vs rank_bm25's BM25Okapi (what the papers' code used).

Queries: the 809 SciFact train claims; relevance: each claim's ``cited_doc_ids``. For each
unit setting (whole abstracts, the BEIR setting; and Veri-R1's 3-sentence units, collapsed
to documents at each document's best unit) it reports index build time, queries/s and
nDCG@10 / recall@100 over documents.

    .venv/bin/python benchmarks/bm25_scifact.py [--data /work/shared/data/scifact] [--json out.json]

Timings: factrl "build" is ``build_index`` end to end (hash, read, cut, tokenize, index,
save); rank_bm25 "build" is tokenization + ``BM25Okapi(...)`` over already-parsed abstracts.
factrl "rank" is ``BM25Retriever.rank`` (all queries in one batch, ids + scores); "search"
adds building the ``Hit`` records that ``Index.search`` returns; rank_bm25 is
``get_scores`` per query plus an ``argpartition`` top-k.
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

import bm25s  # imported before any timing, as rank_bm25 is
import numpy as np

from factrl.corpus import make_units, read_corpus
from factrl.datasets import load_dataset
from factrl.retrieval.index import build_index
from factrl.retrieval.metrics import collapse_to_docs, ndcg_at_k, recall_at_k

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"


def _mean(xs: list[float]) -> float:
    return float(sum(xs) / len(xs))


def _metrics(doc_rankings: list[list[str]], relevant: list[list[str]]) -> dict[str, float]:
    return {
        "ndcg@10": _mean([ndcg_at_k(r, rel, 10) for r, rel in zip(doc_rankings, relevant)]),
        "recall@100": _mean([recall_at_k(r, rel, 100) for r, rel in zip(doc_rankings, relevant)]),
    }


def run_factrl(data: Path, unit_sentences: int, queries: list[str], relevant: list[list[str]], k: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        index = build_index(data / "corpus.jsonl", Path(tmp) / "ix", corpus_format="scifact", unit_sentences=unit_sentences, progress=False)
        build_s = time.perf_counter() - t0
        index.search(queries[:8], k)  # warm caches (stemmer cache, page cache) as a server would be
        t0 = time.perf_counter()
        ranked = index.backend.rank(queries, k)
        rank_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        hits = index.search(queries, k)
        search_s = time.perf_counter() - t0
        passages = index.passages
        docs = [collapse_to_docs(passages[i].doc_id for i in ids) for ids, _ in ranked]
        assert docs == [collapse_to_docs(h.doc_id for h in hs) for hs in hits]
        return {
            "n_passages": len(passages),
            "build_s": build_s,
            "rank_qps": len(queries) / rank_s,
            "search_qps": len(queries) / search_s,
            "distinct_docs_min": min(len(d) for d in docs),
            **_metrics(docs, relevant),
        }


def run_rank_bm25(data: Path, unit_sentences: int, queries: list[str], relevant: list[list[str]], k: int) -> dict[str, float]:
    from rank_bm25 import BM25Okapi

    units = make_units(read_corpus(data / "corpus.jsonl", "scifact"), unit_sentences)
    t0 = time.perf_counter()
    bm25 = BM25Okapi([(u.title + " " + u.text).lower().split() for u in units])
    build_s = time.perf_counter() - t0
    doc_ids = np.array([u.doc_id for u in units])
    t0 = time.perf_counter()
    top: list[np.ndarray] = []
    for q in queries:
        scores = bm25.get_scores(q.lower().split())
        idx = np.argpartition(-scores, k - 1)[:k]
        top.append(idx[np.argsort(-scores[idx], kind="stable")])
    qps = len(queries) / (time.perf_counter() - t0)
    docs = [collapse_to_docs(doc_ids[t].tolist()) for t in top]
    return {"n_passages": len(units), "build_s": build_s, "qps": qps, "distinct_docs_min": min(len(d) for d in docs), **_metrics(docs, relevant)}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SciFact folder (corpus.jsonl, claims_train.jsonl)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        sys.exit(f"SciFact data not found under {args.data}")

    claims = load_dataset("scifact", args.data, "train").claims
    queries = [c.text for c in claims]
    relevant = [c.meta["cited_doc_ids"] for c in claims]
    load_before = os.getloadavg()
    rows = []
    # Units of 3 sentences need deeper passage lists to yield 100 distinct documents.
    for unit_sentences, k in ((0, 100), (3, 1000)):
        f = run_factrl(args.data, unit_sentences, queries, relevant, k)
        r = run_rank_bm25(args.data, unit_sentences, queries, relevant, k)
        rows.append({"unit_sentences": unit_sentences, "k": k, "factrl": f, "rank_bm25": r})
        print(f"done unit_sentences={unit_sentences}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()

    env = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu(),
        "cores": os.cpu_count(),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "python": platform.python_version(),
        "bm25s": bm25s.__version__,
        "queries": len(queries),
    }
    print(f"{env['date']} · {env['cpu']} · {env['cores']} cores · load {env['loadavg_before']} → {env['loadavg_after']} · "
          f"Python {env['python']} · bm25s {env['bm25s']} · {len(queries)} queries\n")
    print("| units | system | passages | build (s) | queries/s | nDCG@10 | recall@100 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        name = "whole abstracts" if row["unit_sentences"] == 0 else f"{row['unit_sentences']}-sentence units (k={row['k']} passages → docs)"
        f, r = row["factrl"], row["rank_bm25"]
        print(f"| {name} | factrl bm25 (rank / search) | {f['n_passages']} | {f['build_s']:.2f} | "
              f"{f['rank_qps']:.0f} / {f['search_qps']:.0f} | {f['ndcg@10']:.4f} | {f['recall@100']:.4f} |")
        print(f"| {name} | rank_bm25 BM25Okapi | {r['n_passages']} | {r['build_s']:.2f} | {r['qps']:.1f} | {r['ndcg@10']:.4f} | {r['recall@100']:.4f} |")
    print()
    for row in rows:
        f, r = row["factrl"], row["rank_bm25"]
        print(f"unit_sentences={row['unit_sentences']}: speed-up rank {f['rank_qps'] / r['qps']:.0f}x, search {f['search_qps'] / r['qps']:.0f}x; "
              f"min distinct docs in a ranking: factrl {f['distinct_docs_min']}, rank_bm25 {r['distinct_docs_min']}")
    if args.json:
        args.json.write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
