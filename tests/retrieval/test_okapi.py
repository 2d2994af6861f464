"""factrl's Okapi BM25 against the reference it reproduces, rank_bm25 0.2.2: the same
scores bit for bit (so the same ranking, ties included) on random corpora."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.retrieval.okapi import OkapiBM25, top_indices

rank_bm25 = pytest.importorskip("rank_bm25")

WORDS = st.sampled_from(["nile", "north", "the", "river", "flows", "a", "sea", "delta", "cairo"])
DOCS = st.lists(st.lists(WORDS, min_size=0, max_size=12), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(corpus=DOCS, query=st.lists(WORDS, max_size=8))
def test_scores_equal_rank_bm25_bit_for_bit(corpus, query):
    if not any(corpus):
        return  # rank_bm25 divides by an average length of 0
    ours, ref = OkapiBM25(corpus), rank_bm25.BM25Okapi(corpus)
    expected = ref.get_scores(query)
    assert ours.get_scores(query).tobytes() == expected.tobytes()
    assert top_indices(ours.get_scores(query), 8) == [int(i) for i in np.argsort(expected)[::-1][:8]]
    assert top_indices(ours.get_scores(query), 3, order="negated") == [int(i) for i in np.argsort(-expected)[:3]]


def test_defaults_and_refusals():
    idx = OkapiBM25([["a", "b"], ["b"], ["c"]])
    assert (idx.k1, idx.b, idx.epsilon) == (1.5, 0.75, 0.25)
    # "b" is in 2 of 3 documents: its idf is negative, floored at epsilon x the mean idf
    assert idx.idf["b"] == pytest.approx(0.25 * idx.average_idf)
    assert OkapiBM25([[], []]).get_scores(["a"]).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="at least one document"):
        OkapiBM25([])
    with pytest.raises(ValueError, match="order"):
        top_indices(np.zeros(2), 1, order="best")
