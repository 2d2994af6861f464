"""Dense at scale: chunked, resumable encoding into a memory map; IVF/PQ trained on a sample."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from factrl.retrieval.dense import DenseRetriever
from factrl.types import Passage


class HashEncoder:
    """A deterministic stand-in encoder: each text's vector comes from its hash."""

    dim = 16
    prefixes = None

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.calls = 0
        self.fail_on_call = fail_on_call
        self.encoded = 0

    def info(self) -> dict:
        return {"model": "hash-16", "model_source": "test", "dim": 16, "normalize": True, "precision": "fp32",
                "encode_path": "fast", "max_seq_length": 64}

    def encode(self, texts, progress=False, desc=""):  # noqa: ANN001, ANN201
        self.calls += 1
        if self.fail_on_call is not None and self.calls == self.fail_on_call:
            raise KeyboardInterrupt
        self.encoded += len(texts)
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8).astype(np.float32) - 127.5
                for t in texts]
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), 16)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def passages(n: int) -> list[Passage]:
    return [Passage(id=f"d{i}#0", doc_id=f"d{i}", title=f"T{i % 7}", text=f"passage number {i}") for i in range(n)]


def test_interrupted_encoding_resumes_after_its_last_chunk(tmp_path: Path) -> None:
    ps = passages(100)
    with pytest.raises(KeyboardInterrupt):
        DenseRetriever.build(ps, tmp_path / "a", encoder=HashEncoder(fail_on_call=4), chunk=20, resume_key="k",
                             progress=False)
    state = json.loads((tmp_path / "a" / "encode.json").read_text())
    assert state["done"] == 60
    enc = HashEncoder()
    resumed = DenseRetriever.build(ps, tmp_path / "a", encoder=enc, chunk=20, resume_key="k", progress=False)
    assert enc.encoded == 40  # only the last two chunks
    fresh = DenseRetriever.build(ps, tmp_path / "b", encoder=HashEncoder(), chunk=20, progress=False)
    a = np.load(tmp_path / "a" / "embeddings.npy")
    assert np.array_equal(a, np.load(tmp_path / "b" / "embeddings.npy"))
    assert not (tmp_path / "a" / "encode.json").exists()
    q = ["passage number 5", "T3"]
    assert [[h.passage.id for h in r] for r in resumed.search_vectors(a[:2], 5)] == \
        [[h.passage.id for h in r] for r in fresh.search_vectors(a[:2], 5)]
    assert q  # queries are encoded by the same stand-in on both
    # Another key (other passages or model) encodes everything again.
    enc2 = HashEncoder()
    DenseRetriever.build(ps, tmp_path / "a", encoder=enc2, chunk=20, resume_key="other", progress=False)
    assert enc2.encoded == 100


def test_ivfpq_trains_on_a_sample_and_finds_exact_neighbours(tmp_path: Path) -> None:
    ps = passages(3000)
    flat = DenseRetriever.build(ps, tmp_path / "flat", encoder=HashEncoder(), progress=False)
    pq = DenseRetriever.build(ps, tmp_path / "pq", encoder=HashEncoder(), index_type="ivfpq", ivf_nlist=8,
                              ivf_nprobe=8, pq_m=8, train_size=2000, progress=False)
    p = pq.params()
    assert (p["index_type"], p["ivf_nlist"], p["pq_m"], p["pq_nbits"], p["train_size"]) == ("ivfpq", 8, 8, 8, 2000)
    vecs = np.load(tmp_path / "flat" / "embeddings.npy")[:50]
    exact = [r[0].passage.id for r in flat.search_vectors(vecs, 1)]
    approx = [[h.passage.id for h in r] for r in pq.search_vectors(vecs, 10)]
    # every cell probed: PQ rounding only; each passage's own vector is in its top 10
    assert sum(e in a for e, a in zip(exact, approx)) >= 48
    loaded = DenseRetriever.load(ps, tmp_path / "pq", p, encoder=HashEncoder())
    assert [[h.passage.id for h in r] for r in loaded.search_vectors(vecs, 10)] == approx
    with pytest.raises(ValueError, match="pq_m must divide"):
        DenseRetriever.build(ps, tmp_path / "bad", encoder=HashEncoder(), index_type="ivfpq", pq_m=5, progress=False)


def test_ivf_default_sample_and_build_index_resume(tmp_path: Path) -> None:
    from factrl.retrieval.index import build_index, load_index

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "title": f"T{i}", "text": f"Sentence {i}. Another one {i}."})
                              + "\n" for i in range(400)))
    enc = HashEncoder(fail_on_call=3)
    with pytest.raises(KeyboardInterrupt):
        build_index(corpus, tmp_path / "ix", retriever="dense", encoder=enc, index_type="ivf", progress=False,
                    resume=True, chunk=100, unit_sentences=1)
    assert (tmp_path / "ix" / "passages.json").is_file()  # the passage store survived
    enc = HashEncoder()
    ix = build_index(corpus, tmp_path / "ix", retriever="dense", encoder=enc, index_type="ivf", progress=False,
                     resume=True, chunk=100, unit_sentences=1, ivf_nprobe=20)
    assert enc.encoded == 800 - 200
    assert ix.manifest.params["train_size"] == 800 and ix.manifest.params["ivf_nlist"] == 20
    again = load_index(tmp_path / "ix", options={"encoder": HashEncoder()})
    assert again.search(["T3 Sentence 3."], 1)[0][0].passage.id == "d3#0"  # title + text, as encoded
