"""FFRR encodes queries and candidates the way its frozen index did: with the index's
recorded prefixes (E5's "query: " / "passage: "), in training and in evaluation."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from factrl.train.ffrr.episodes import Candidates  # noqa: E402
from factrl.train.ffrr.evaluate import PoolReranker  # noqa: E402
from factrl.types import Hit, Passage  # noqa: E402

DOCS = [Passage(id=f"d{i}", doc_id=f"d{i}", text=f"doc {i}") for i in range(3)]


class Frozen:
    name = "dense"

    def params(self):
        return {"query_prefix": "query: ", "passage_prefix": "passage: "}

    def search(self, queries, k):
        return [[Hit(passage=p, score=1.0 - i / 10) for i, p in enumerate(DOCS[:k])] for _ in queries]

    def search_vectors(self, vectors, k):
        return self.search(["x"] * len(vectors), k)


class Policy:
    tau = 1.0
    device = "cpu"

    def __init__(self):
        self.texts = []

    def candidate_log_probs(self, query, docs, *, doc_grad):
        self.texts.append((query, list(docs)))
        return torch.log_softmax(torch.zeros(len(docs)), dim=0)

    def embed(self, texts):
        self.texts.append((list(texts), None))
        return torch.zeros((len(texts), 2))

    def log_probs(self, q, d):
        return torch.log_softmax(d @ q, dim=0)


def test_training_encodes_with_the_index_prefixes():
    policy = Policy()
    cands = Candidates(Frozen(), 3)
    (docs,) = cands.get(["Is it?"])
    cands.log_probs(policy, "Is it?", docs, doc_grad=False)
    assert policy.texts[-1] == ("query: Is it?", ["passage: doc 0", "passage: doc 1", "passage: doc 2"])
    rows = {p.id: i for i, p in enumerate(DOCS)}
    against_index = Candidates(Frozen(), 3, vectors=np.zeros((3, 2), dtype=np.float32), rows=rows)
    against_index.log_probs(policy, "Is it?", docs, doc_grad=False)
    assert policy.texts[-1] == (["query: Is it?"], None)


class Encoder:
    def __init__(self):
        self.texts = []

    def encode(self, texts):
        self.texts.append(list(texts))
        return np.ones((len(texts), 2), dtype=np.float32)


class Index:
    backend = Frozen()

    def search(self, queries, k):
        return self.backend.search(queries, k)


def test_evaluation_encodes_with_the_index_prefixes():
    enc = Encoder()
    PoolReranker(enc, Index(), depth=3).search(["Is it?"], 2)
    assert ["passage: doc 0", "passage: doc 1", "passage: doc 2"] in enc.texts and ["query: Is it?"] in enc.texts
    enc = Encoder()
    PoolReranker(enc, Index(), depth=0).search(["Is it?"], 2)
    assert enc.texts == [["query: Is it?"]]
