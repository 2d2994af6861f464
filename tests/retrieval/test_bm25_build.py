"""The streaming BM25 build against bm25s's in-memory build: same matrix, bit for bit."""

from pathlib import Path

import numpy as np
import pytest

from factrl.retrieval.bm25 import BM25Retriever, BM25Tokenizer
from factrl.retrieval.bm25_build import build_matrix
from factrl.types import Passage

WORDS = ["the", "of", "and", "lighthouse", "granite", "harbor", "running", "runs", "ran", "bees", "bee",
         "nectar", "river", "rivers", "volcano", "lava", "glacier", "ice", "a", "is", "Storm", "storms", "x9", "é"]


def random_passages(n: int, seed: int = 0) -> list[Passage]:
    """Zipf-ish words incl. stopwords, repeats, an empty passage and title-only ones."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    p /= p.sum()
    out = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(0, 14)), p=p).tolist()
        title = " ".join(rng.choice(WORDS, size=int(rng.integers(0, 3))).tolist())
        text = " ".join(words) if words else ("the of and" if i % 2 else "")
        out.append(Passage(id=f"d{i}#0", doc_id=f"d{i}", title=title, text=text))
    return out


def bm25s_reference(passages: list[Passage], settings: dict) -> tuple[object, dict[str, int]]:
    import bm25s

    tok = BM25Tokenizer(settings["stopwords"], settings["stemmer"])
    model = bm25s.BM25(k1=settings["k1"], b=settings["b"], method=settings["method"])
    model.index([tok(BM25Retriever.indexed_text(p, settings["title_weight"])) for p in passages],
                show_progress=False, create_empty_token=True)
    return model, model.vocab_dict


def columns(data, indices, indptr, vocab: dict[str, int]) -> dict[str, list[tuple[int, int]]]:
    """term → [(row, float32 bits)] sorted by row."""
    out = {}
    for term, t in vocab.items():
        if term == "" or t + 1 >= len(indptr):
            continue
        s, e = int(indptr[t]), int(indptr[t + 1])
        out[term] = sorted(zip(np.asarray(indices[s:e]).tolist(), np.asarray(data[s:e]).view(np.uint32).tolist()))
    return out


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
@pytest.mark.parametrize("title_weight", [0, 2])
def test_streaming_matrix_equals_bm25s_bit_for_bit(tmp_path: Path, method: str, title_weight: int) -> None:
    passages = random_passages(300)
    settings = BM25Retriever._validate(method=method, title_weight=title_weight, k1=1.2, b=0.75)
    tok = BM25Tokenizer(settings["stopwords"], settings["stemmer"])
    stats = build_matrix(passages, tmp_path, settings, tok, chunk=37)  # 9 chunks, a short last one
    model, vocab = bm25s_reference(passages, settings)
    ours = BM25Retriever._open(tmp_path, passages, settings)
    ref = model.scores
    assert stats.n_docs == 300 and stats.nnz == len(ref["data"])
    mine_vocab = {t: ours._vocab.get(t) for t in vocab if t}
    assert None not in mine_vocab.values() and len(ours._vocab) == len(vocab) - 1
    m = ours._matrix
    assert columns(m.data, m.indices, m.indptr, mine_vocab) == columns(ref["data"], ref["indices"], ref["indptr"], vocab)
    assert not (tmp_path / ".build").exists()


def brute_force(passages: list[Passage], settings: dict, ids: list[int], k: int, model: object) -> tuple[list, list]:
    """bm25s's own scores (get_scores_from_ids), then an exact full sort."""
    if not ids:
        return [], []
    scores = model.get_scores_from_ids(ids)
    nz = np.flatnonzero(scores > 0)
    order = np.lexsort((nz, -scores[nz]))[:k]
    return nz[order].tolist(), scores[nz][order].tolist()


NO_NUMBA = pytest.mark.skipif(__import__("importlib").util.find_spec("numba") is None, reason="numba is not installed")
KERNELS = ["numpy", "reference", pytest.param("numba", marks=NO_NUMBA), pytest.param("maxscore", marks=NO_NUMBA)]


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernels_give_bm25s_scores_and_exact_ties(tmp_path: Path, kernel: str) -> None:
    # Duplicated passages make exact ties, also at the k-th place.
    base = random_passages(120, seed=3)
    passages = base + [Passage(id=f"dup{i}#0", doc_id=f"dup{i}", title=p.title, text=p.text)
                       for i, p in enumerate(base[:40])]
    settings = BM25Retriever._validate()
    r = BM25Retriever.build(passages, tmp_path / "bm25", kernel=kernel)
    model, vocab = bm25s_reference(passages, settings)
    queries = ["lighthouse granite", "bees nectar river", "the of", "", "storm", "runs ran running é x9",
               "volcano volcano lava", "zzz"]
    for k in (1, 3, 10, 500):
        ranked = r.rank(queries, k)
        for q, (rows, scores) in zip(queries, ranked):
            ids = [vocab[t] for t in BM25Tokenizer()(q) if t in vocab]
            want_rows, want_scores = brute_force(passages, settings, ids, min(k, len(passages)), model)
            assert scores == want_scores, (kernel, q, k)  # same float32 values
            if kernel == "reference" and scores:  # bm25s's argpartition: any rows tied at the k-th place
                last = scores[-1]
                assert [d for d, s in zip(rows, scores) if s != last] == [d for d, s in zip(want_rows, want_scores) if s != last]
            else:
                assert rows == want_rows, (kernel, q, k)
    r.n_threads = 2
    assert r.rank(queries, 10) == BM25Retriever.load(r._passages, tmp_path / "bm25", r.params(), kernel=kernel).rank(queries, 10)


def test_kernels_agree_with_each_other(tmp_path: Path) -> None:
    passages = random_passages(400, seed=7)
    r = BM25Retriever.build(passages, tmp_path / "bm25", kernel="numpy")
    queries = [" ".join(np.random.default_rng(i).choice(WORDS, size=6).tolist()) for i in range(50)]
    want = r.rank(queries, 10)
    names = ["reference"] + (["numba", "maxscore"] if __import__("importlib").util.find_spec("numba") else [])
    for name in names:
        r.kernel = name
        got = r.rank(queries, 10)
        assert [s for _, s in got] == [s for _, s in want]
        if name != "reference":
            assert got == want


def test_unknown_kernel_fails_before_building(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="unknown BM25 top-k kernel 'fastest'"):
        BM25Retriever.build(random_passages(5), tmp_path / "x", kernel="fastest")
    assert not (tmp_path / "x").exists()


def test_interrupted_build_resumes_its_finished_chunks(tmp_path: Path) -> None:
    passages = random_passages(250, seed=5)
    settings = BM25Retriever._validate()
    tok = BM25Tokenizer()
    seen: list[str] = []
    import factrl.retrieval.bm25_build as bb

    calls = {"n": 0}
    real = bb._count_chunk

    def flaky(*a, **kw):  # the fourth chunk fails, as a killed process would
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(*a, **kw)

    bb._count_chunk = flaky
    try:
        with pytest.raises(KeyboardInterrupt):
            build_matrix(passages, tmp_path / "a", settings, tok, chunk=30, resume_key="corpus-1")
    finally:
        bb._count_chunk = real
    assert (tmp_path / "a" / ".build" / "state.json").is_file()
    other = build_matrix(passages, tmp_path / "b", settings, tok, chunk=30)
    again = build_matrix(passages, tmp_path / "a", settings, tok, chunk=30, resume_key="corpus-1", say=seen.append)
    assert again.resumed_parts == 3 and other.resumed_parts == 0
    assert any("resuming after 3 finished chunks" in m for m in seen)
    for f in ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.terms.bin"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    # another key (other inputs) starts over
    third = build_matrix(passages, tmp_path / "a", settings, tok, chunk=30, resume_key="corpus-2")
    assert third.resumed_parts == 0


def test_old_index_with_json_vocabulary_only_still_loads(tmp_path: Path) -> None:
    passages = random_passages(60, seed=2)
    r = BM25Retriever.build(passages, tmp_path / "bm25")
    queries = ["lighthouse granite", "bees", "volcano lava river"]
    want = r.rank(queries, 5)
    for f in ("vocab.hash.npy", "vocab.row.npy", "vocab.terms.bin", "vocab.offsets.npy"):
        (tmp_path / "bm25" / f).unlink()
    old = BM25Retriever.load(passages, tmp_path / "bm25", r.params(), mmap=False)
    assert type(old._vocab).__name__ == "DictVocab"
    assert old.rank(queries, 5) == want


@NO_NUMBA
def test_maxscore_prunes_and_still_equals_the_exhaustive_walk(tmp_path: Path) -> None:
    # Zipfian words: a few common, low-scoring terms with long lists, many rare ones.
    rng = np.random.default_rng(11)
    vocab = [f"w{i}x" for i in range(3000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    passages = [Passage(id=f"d{i}#0", doc_id=f"d{i}", text=" ".join(rng.choice(vocab, size=int(rng.integers(5, 40)), p=p)))
                for i in range(4000)]
    r = BM25Retriever.build(passages, tmp_path / "bm25", kernel="numpy")
    queries = [" ".join(rng.choice(vocab, size=6, p=p)) for _ in range(150)]
    queries += [f"{vocab[0]} {vocab[1]} {vocab[i]} {vocab[i + 1]} {vocab[0]}" for i in range(500, 560)]  # repeats too
    exhaustive = {k: r.rank(queries, k) for k in (1, 5, 10)}
    m = r._matrix
    postings = sum(int(m.indptr[t + 1] - m.indptr[t]) for q in queries for t in set(r._term_ids(q)))
    r.kernel = "maxscore"
    for k, want in exhaustive.items():
        assert r.rank(queries, k) == want, k
    assert r._kernel.work < postings / 2  # most of the long lists were skipped
    (acc, _), = r._kernel._scratch._free  # one call at a time: one set of scratch arrays
    assert not acc.any()  # left clean for the next batch


@pytest.mark.parametrize("kernel", ["numpy", pytest.param("maxscore", marks=NO_NUMBA)])
def test_concurrent_callers_share_a_few_scratch_arrays(tmp_path: Path, kernel: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    passages = random_passages(300, seed=9)
    r = BM25Retriever.build(passages, tmp_path / "bm25", kernel=kernel)
    queries = [" ".join(np.random.default_rng(i).choice(WORDS, size=5).tolist()) for i in range(40)]
    want = r.rank(queries, 5)
    with ThreadPoolExecutor(8) as pool:  # many threads, as a server's pool: results unchanged
        got = list(pool.map(lambda i: r.rank(queries[i : i + 5], 5), range(0, 40, 5)))
    assert [x for part in got for x in part] == want
    assert 1 <= r._kernel._scratch.held <= 8
    for acc, _ in r._kernel._scratch._free:
        assert not acc.any()


@NO_NUMBA
@pytest.mark.parametrize("block", [1, 3, 64, 1 << 20])
def test_blocked_walk_adds_each_row_in_term_order_bit_for_bit(tmp_path: Path, block: int) -> None:
    from factrl.retrieval._bm25_numba import _accumulate

    r = BM25Retriever.build(random_passages(400, seed=3), tmp_path / "bm25", kernel="numpy")
    m = r._matrix
    lengths = np.diff(np.asarray(m.indptr))
    longest = np.argsort(-lengths)[:5]  # long lists overlap in many rows: the order of the sums shows
    rng = np.random.default_rng(block)
    for trial in range(20):
        terms = rng.choice(longest, size=int(rng.integers(1, 7))).astype(np.int64)  # repeats too
        weights = rng.choice(np.array([1.0, 2.0, 0.7], dtype=np.float32), size=len(terms))
        want = np.zeros(m.num_docs, dtype=np.float32)
        for t, w in zip(terms, weights):  # list after list, float32 as the kernel adds
            s, e = int(m.indptr[t]), int(m.indptr[t + 1])
            rows = np.asarray(m.indices[s:e])
            want[rows] = want[rows] + w * np.asarray(m.data[s:e])
        acc = np.zeros(m.num_docs, dtype=np.float32)
        touched = np.zeros(m.num_docs, dtype=np.int64)
        count = _accumulate(m.data, m.indices, m.indptr, terms, weights, acc, touched, 0,
                            np.empty(len(terms), dtype=np.int64), block)
        assert np.array_equal(acc.view(np.uint32), want.view(np.uint32)), (block, trial)
        assert sorted(touched[:count].tolist()) == np.flatnonzero(want).tolist()  # each row once
