from pathlib import Path

import numpy as np
import pytest

from factrl.retrieval.base import RETRIEVERS, IndexMismatchError
from factrl.retrieval.bm25 import BM25Retriever, BM25Tokenizer
from factrl.types import Passage

PASSAGES = [
    Passage(id="cat#0", doc_id="cat", title="Cats", text="Cats purr and chase mice."),
    Passage(id="dog#0", doc_id="dog", title="Dogs", text="Dogs bark at the mail carrier."),
    Passage(id="dog#1", doc_id="dog", title="Dogs", text="Running dogs chase balls in parks."),
    Passage(id="sea#0", doc_id="sea", title="Oceans", text="The ocean covers most of the planet."),
]


@pytest.fixture()
def built(tmp_path: Path) -> BM25Retriever:
    return BM25Retriever.build(PASSAGES, tmp_path / "bm25")


def test_registered_under_bm25() -> None:
    assert RETRIEVERS.get("bm25") is BM25Retriever


def test_tokenizer_stems_and_drops_stopwords() -> None:
    tok = BM25Tokenizer()
    assert tok("The running Dogs are barking!") == ["run", "dog", "bark"]
    assert BM25Tokenizer(stopwords="none", stemmer="none")("The dogs") == ["the", "dogs"]
    with pytest.raises(ValueError, match="unknown stopwords"):
        BM25Tokenizer(stopwords="klingon")
    with pytest.raises(ValueError, match="unknown stemmer"):
        BM25Tokenizer(stemmer="klingon")


def test_search_ranks_matching_passages_first(built: BM25Retriever) -> None:
    hits = built.search(["dogs chasing", "ocean planet"], k=10)
    assert [h.passage_id for h in hits[0]] == ["dog#1", "dog#0", "cat#0"]  # stem 'chase'; title adds 'dog'
    assert hits[1][0].passage_id == "sea#0" and len(hits[1]) == 1
    scores = [h.score for h in hits[0]]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_k_clamped_and_empty_queries(built: BM25Retriever) -> None:
    assert len(built.search(["dogs cats mice ocean"], k=1000)[0]) == 4
    assert built.search(["", "the of and", "zebra"], k=3) == [[], [], []]
    assert built.search(["dogs"], k=0) == [[]]
    assert built.search([], k=3) == []
    with pytest.raises(TypeError):
        built.search("dogs", k=3)  # type: ignore[arg-type]


def test_saved_without_pickle_and_reloads_same_results(built: BM25Retriever, tmp_path: Path) -> None:
    directory = tmp_path / "bm25"
    npy = sorted(directory.glob("*.npy"))
    assert npy, "bm25s arrays were not saved"
    for f in npy:
        arr = np.load(f, allow_pickle=False)  # raises if anything was pickled
        assert arr.dtype != object
    assert (directory / "vocab.index.json").is_file()
    assert not list(directory.glob("*.pkl")) and not list(directory.glob("*.pickle"))
    loaded = BM25Retriever.load(PASSAGES, directory, built.params())
    queries = ["dogs chasing", "purring cats", "nothing here"]
    assert loaded.search(queries, 3) == built.search(queries, 3)


def test_params_recorded_and_validated(tmp_path: Path) -> None:
    r = BM25Retriever.build(PASSAGES, tmp_path / "x", k1=1.2, b=0.75, stopwords="none", title_weight=0)
    p = r.params()
    assert (p["k1"], p["b"], p["method"], p["stemmer"], p["stopwords"], p["title_weight"]) == (1.2, 0.75, "lucene", "english", "none", 0)
    with pytest.raises(ValueError, match="does not take parameter.*model"):
        BM25Retriever.build(PASSAGES, tmp_path / "y", model="minilm")
    with pytest.raises(ValueError, match="unknown BM25 method"):
        BM25Retriever.build(PASSAGES, tmp_path / "y", method="tfidf")
    with pytest.raises(ValueError, match="zero passages"):
        BM25Retriever.build([], tmp_path / "z")


def test_title_weight_changes_ranking(tmp_path: Path) -> None:
    passages = [
        Passage(id="a#0", doc_id="a", title="Volcano", text="Lava is hot."),
        Passage(id="b#0", doc_id="b", title="Rivers", text="A volcano is far from this river valley. Water flows."),
    ]
    no_title = BM25Retriever.build(passages, tmp_path / "n", title_weight=0).search(["volcano"], 2)[0]
    with_title = BM25Retriever.build(passages, tmp_path / "t", title_weight=1).search(["volcano"], 2)[0]
    assert [h.passage_id for h in no_title] == ["b#0"]
    assert with_title[0].passage_id == "a#0"


def test_load_refuses_incomplete_or_disagreeing_directory(built: BM25Retriever, tmp_path: Path) -> None:
    directory = tmp_path / "bm25"
    with pytest.raises(IndexMismatchError, match="disagrees"):
        BM25Retriever.load(PASSAGES, directory, {**built.params(), "k1": 2.0})
    with pytest.raises(IndexMismatchError, match="4 documents but passages.jsonl has 3"):
        BM25Retriever.load(PASSAGES[:3], directory, built.params())
    (directory / "vocab.index.json").unlink()
    with pytest.raises(IndexMismatchError, match="missing vocab.index.json"):
        BM25Retriever.load(PASSAGES, directory, built.params())


def test_rank_matches_bm25s_scores(built: BM25Retriever) -> None:
    # The scores come straight from bm25s: check one against the Lucene BM25 formula.
    # Query 'ocean' matches only sea#0 (title 'Oceans' + text 'ocean'): tf=2 after stemming.
    import math

    n, df, tf = 4, 1, 2
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    lengths = [len(BM25Tokenizer()(BM25Retriever.indexed_text(p, 1))) for p in PASSAGES]
    avgdl, dl = sum(lengths) / n, lengths[3]
    k1, b = 0.9, 0.4
    expected = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))
    (idx, scores), = built.rank(["ocean"], 5)
    assert idx == [3]
    assert scores[0] == pytest.approx(expected, rel=1e-5)


@pytest.mark.data
def test_scifact_quality_floor(shared_data: Path, tmp_path: Path) -> None:
    # Whole-abstract BM25 on the 809 SciFact train claims: the project's nDCG@10 floor.
    from factrl.datasets import load_dataset
    from factrl.retrieval.index import build_index
    from factrl.retrieval.metrics import doc_ranking, ndcg_at_k

    data = shared_data / "scifact"
    claims = load_dataset("scifact", data, "train").claims
    index = build_index(data / "corpus.jsonl", tmp_path / "ix", corpus_format="scifact", unit_sentences=0, progress=False)
    hits = index.search([c.text for c in claims], 10)
    ndcg = sum(ndcg_at_k(doc_ranking(h), c.meta["cited_doc_ids"], 10) for h, c in zip(hits, claims)) / len(claims)
    assert ndcg >= 0.68


def test_rank_agrees_with_bm25s_retrieve_and_threads(tmp_path: Path) -> None:
    import bm25s

    from factrl.corpus import make_units, read_corpus

    passages = make_units(read_corpus(Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"), 1)
    r = BM25Retriever.build(passages, tmp_path / "bm25")
    model = bm25s.BM25.load(tmp_path / "bm25", load_vocab=True, show_progress=False)  # the files stay bm25s's
    queries = ["lighthouse granite tower", "water", "bees collect nectar from flowers", "the"]
    ours = r.rank(queries, 5)
    for q, (idx, scores) in zip(queries, ours):
        tokens = r.tokenize(q)
        if not tokens:
            assert idx == []
            continue
        docs, ref = model.retrieve([tokens], k=5, show_progress=False)
        ref_scores = [s for s in ref[0].tolist() if s > 0]
        assert scores == pytest.approx(ref_scores)
        assert set(idx[: len(ref_scores)]) <= set(docs[0].tolist()) | {i for i, s in zip(idx, scores) if s == scores[-1]}
    r.n_threads = 2
    assert r.rank(queries, 5) == ours
