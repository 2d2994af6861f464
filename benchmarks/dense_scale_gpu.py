"""Dense retrieval at scale on a GPU: streaming encoding, resumption, IVF-PQ from a sample.

One short script for a GPU machine (minutes on one H100): it generates a synthetic
Wikipedia (``benchmarks/retrieval_scale.py``), builds its passage store, encodes the
passages on the GPU with the embedded MiniLM in chunks into a memory-mapped
``embeddings.npy``, interrupts the encoding after a few chunks and resumes it (checking
the resumed embeddings equal an uninterrupted run's), builds ``flat`` and ``ivfpq``
indexes over the same embeddings and measures IVF-PQ's recall@10 against exact search,
load time and query throughput. Prints one JSON object; ``--json-out`` writes it too.

    HF_HUB_OFFLINE=1 python benchmarks/dense_scale_gpu.py --docs 200000 --work /tmp/dense-gpu \\
        --json-out /tmp/dense-gpu/result.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--chunk", type=int, default=32_768)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--json-out", type=Path)
    a = ap.parse_args()

    import torch

    from factrl.corpus import make_units, read_corpus
    from factrl.retrieval.dense import DenseRetriever, resolve_device
    from factrl.retrieval.encoders import get_encoder
    from factrl.retrieval.store import PassageStore, PassageWriter
    from retrieval_scale import generate

    device = resolve_device(a.device)
    out: dict = {"device": device, "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
                 "docs": a.docs, "model": a.model}
    corpus = a.work / "corpus"
    if not (corpus / "queries.jsonl").is_file():
        t = time.perf_counter()
        generate(a.docs, corpus, "fever", n_queries=1000)
        out["generate_s"] = time.perf_counter() - t
    store_dir = a.work / "store"
    if not (store_dir / "passages.offsets.npy").is_file():
        w = PassageWriter(store_dir)
        for doc in read_corpus(corpus / "corpus", "fever_wiki"):
            for p in make_units([doc], 3):
                w.add(p)
        w.close()
    store = PassageStore(store_dir)
    out["passages"] = len(store)

    encoder = get_encoder(a.model, batch_size=a.batch_size, device=device)
    out["precision"] = encoder.precision

    class Stop(Exception):
        pass

    class StopAfter:  # the encoder, failing on its 4th chunk: an interrupted build
        def __init__(self, inner, calls: int) -> None:
            self.inner, self.calls, self.dim, self.prefixes = inner, calls, inner.dim, inner.prefixes

        def info(self):
            return self.inner.info()

        def encode(self, texts, **kw):
            self.calls -= 1
            if self.calls < 0:
                raise Stop
            return self.inner.encode(texts, **kw)

    say = lambda msg: print(f"[dense-gpu] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    # 1. an interrupted encoding, then resumed
    resumed_dir = a.work / "resumed"
    try:
        DenseRetriever.build(store, resumed_dir, encoder=StopAfter(encoder, 3), chunk=a.chunk, resume_key="bench",
                             say=say)
    except Stop:
        pass
    state = json.loads((resumed_dir / "encode.json").read_text())
    out["interrupted_after_rows"] = state["done"]
    t = time.perf_counter()
    DenseRetriever.build(store, resumed_dir, encoder=encoder, chunk=a.chunk, resume_key="bench", say=say)
    out["resume_encode_s"] = time.perf_counter() - t
    # 2. an uninterrupted encoding, timed
    flat_dir = a.work / "flat"
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t = time.perf_counter()
    flat = DenseRetriever.build(store, flat_dir, encoder=encoder, chunk=a.chunk, say=say)
    out["encode_and_flat_s"] = time.perf_counter() - t
    out["passages_per_s"] = len(store) / out["encode_and_flat_s"]
    emb = np.load(flat_dir / "embeddings.npy", mmap_mode="r")
    resumed = np.load(resumed_dir / "embeddings.npy", mmap_mode="r")
    out["resumed_max_abs_diff"] = float(np.abs(emb[:: max(1, len(store) // 5000)] -
                                               resumed[:: max(1, len(store) // 5000)]).max())
    # 3. IVF-PQ trained on a sample, from the saved embeddings
    t = time.perf_counter()
    pq = DenseRetriever.build(store, a.work / "ivfpq", encoder=encoder, embeddings=np.asarray(emb),
                              index_type="ivfpq", ivf_nprobe=32, say=say)
    out["ivfpq_build_s"] = time.perf_counter() - t
    out["ivfpq_params"] = {k: pq.params()[k] for k in ("ivf_nlist", "ivf_nprobe", "pq_m", "train_size")}
    queries = [json.loads(line)["text"] for line in (corpus / "queries.jsonl").open()]
    qv = flat.encode_queries(queries)
    exact = flat.search_vectors(qv, 10)
    t = time.perf_counter()
    approx = pq.search_vectors(qv, 10)
    out["ivfpq_queries_per_s"] = len(queries) / (time.perf_counter() - t)
    out["ivfpq_recall_at_10"] = float(np.mean([len({h.passage.id for h in e} & {h.passage.id for h in p}) / 10
                                               for e, p in zip(exact, approx)]))
    t = time.perf_counter()
    loaded = DenseRetriever.load(store, a.work / "ivfpq", pq.params(), encoder=encoder)
    out["ivfpq_load_s"] = time.perf_counter() - t
    out["ivfpq_loaded_same"] = [[h.passage.id for h in r] for r in loaded.search_vectors(qv[:50], 10)] == \
        [[h.passage.id for h in r] for r in approx[:50]]
    out["index_bytes"] = {name: sum(f.stat().st_size for f in (a.work / name).iterdir())
                          for name in ("flat", "ivfpq")}
    print(json.dumps(out, indent=2))
    if a.json_out:
        a.json_out.parent.mkdir(parents=True, exist_ok=True)
        a.json_out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
