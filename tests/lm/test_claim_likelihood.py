"""The claim-likelihood scorer (an alternative FFRR reward) on a tiny transformers LM."""

import math

import pytest

pytest.importorskip("torch")

from factrl.lm.claim_likelihood import ClaimLikelihoodScorer
from factrl.lm.label_scores import LabelScoreError
from factrl.lm.tiny import build_tiny_model

DOCS = ["Aspirin lowers fever in adults with influenza.", "The Eiffel Tower is in Paris."]
CLAIM = "Aspirin reduces fever."


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    from factrl.lm.loader import load_lm

    return load_lm(str(build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=1)))


def test_value_is_the_mean_token_log_likelihood_of_the_claim(lm):
    scorer = ClaimLikelihoodScorer(lm, max_doc_chars=20)
    (row,) = scorer.probs([(CLAIM, [DOCS[0]])])
    prompt = lm.encode(f"Passage: {DOCS[0][:20]}\nA claim based on this passage:")
    claim = lm.encode(" " + CLAIM)
    expected = sum(lm.token_logprobs(prompt, claim)) / len(claim)
    assert len(row) == 1 and row[0] < 0 and math.isclose(row[0], expected, rel_tol=1e-4, abs_tol=1e-4)


def test_batched_equals_one_at_a_time_and_documents_matter(lm):
    items = [(CLAIM, [d]) for d in DOCS] + [(CLAIM, DOCS)]
    batched = ClaimLikelihoodScorer(lm, batch_size=8).probs(items)
    single = [ClaimLikelihoodScorer(lm, batch_size=1).probs([it])[0] for it in items]
    assert all(math.isclose(a[0], b[0], abs_tol=1e-4) for a, b in zip(batched, single))
    assert len({round(r[0], 4) for r in batched}) == 3  # each document set gives its own value


def test_bad_input_and_backends_are_refused(lm):
    scorer = ClaimLikelihoodScorer(lm)
    with pytest.raises(LabelScoreError, match="empty claim"):
        scorer.probs([("  ", DOCS)])
    with pytest.raises(TypeError):
        scorer.prompt_text("one string")
    with pytest.raises(LabelScoreError, match="cannot score continuations"):
        ClaimLikelihoodScorer(object())
    with pytest.raises(LabelScoreError, match="evidence"):
        ClaimLikelihoodScorer(lm, template="no slot")
