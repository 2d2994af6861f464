"""The verifier's decision rules (response, claim, retrieved units) on a keyword stand-in."""

from __future__ import annotations

import numpy as np
import pytest

from _support import KeywordVerifier
from factrl.labels import Label
from factrl.metrics.hallucination import Support
from factrl.types import Passage
from factrl.verifier.judge import (aggregate_verdict, judge_claims_by_verifier, judge_statements,
                                   response_contradictions, response_sentences)
from factrl.verifier.scoring import PairVerifier, Thresholds


def test_the_stand_in_is_a_pair_verifier():
    assert isinstance(KeywordVerifier(), PairVerifier)


def test_a_response_contradicts_when_any_sentence_against_any_chunk_passes_the_threshold():
    v = KeywordVerifier()
    out = response_contradictions(v, ["Aspirin lowers fever. It is cheap.", "Water is wet."],
                                  [["Aspirin does lower fever in adults.", "Aspirin is not cheap."],
                                   ["Water is wet and clear."]])
    assert out[0].contradicts and out[0].p_refute == pytest.approx(0.9) and out[0].chunk == 1
    assert not out[1].contradicts and out[1].p_refute == pytest.approx(0.1)
    # every (sentence, chunk) pair was read once
    assert len(v.calls) == 2 * 2 + 1
    # a higher threshold is stricter
    assert not response_contradictions(v, ["x"], [["not so"]], threshold=0.95)[0].contradicts


def test_a_response_without_text_or_evidence_contradicts_nothing():
    v = KeywordVerifier()
    out = response_contradictions(v, ["", "Some text."], [["not this"], []])
    assert [c.contradicts for c in out] == [False, False] and not v.calls
    assert response_sentences("   ") == []


def test_statement_judgements_take_the_larger_margin():
    v = KeywordVerifier(support=0.5, refute=0.5)
    got = judge_statements(v, ["Aspirin lowers fever", "Aspirin lowers fever", "Aspirin lowers fever"],
                           [["Aspirin lowers fever strongly"], ["Aspirin never lowers fever"], ["Rain today"]])
    assert [j.label for j in got] == [Label.SUPPORT, Label.REFUTE, Label.NEI]
    assert got[1].passage == 0 and got[2].passage is None
    # thresholds matter: a support threshold above 0.8 leaves the first one unsupported
    strict = judge_statements(v, ["Aspirin lowers fever"], [["Aspirin lowers fever strongly"]],
                              thresholds=Thresholds(support=0.85, refute=0.5))
    assert strict[0].label == Label.NEI


def test_aggregate_verdict_cites_the_units_past_the_threshold_best_first():
    probs = np.array([[0.6, 0.2, 0.2], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.55, 0.3, 0.15]])
    v = aggregate_verdict(probs, ["a", "b", "c", "d"], Thresholds(support=0.5, refute=0.5), max_evidence=2)
    assert v.label == Label.SUPPORT and v.evidence_ids == ["b", "a"] and v.confidence == pytest.approx(0.9)
    nei = aggregate_verdict(probs[2:3], ["c"], Thresholds(0.5, 0.5))
    assert nei.label == Label.NEI and nei.evidence_ids == [] and nei.confidence == pytest.approx(0.9)
    empty = aggregate_verdict(np.zeros((0, 3)), [], Thresholds())
    assert empty.label == Label.NEI
    with pytest.raises(ValueError, match="unit ids"):
        aggregate_verdict(probs, ["a"], Thresholds())


def test_long_form_claims_judged_by_the_verifier():
    v = KeywordVerifier()
    judged = judge_claims_by_verifier(
        v, ["Aspirin lowers fever", "Aspirin lowers fever", "Nothing here"],
        [[Passage(id="p", doc_id="d", title="Aspirin", text="lowers fever in adults")],
         ["Aspirin never lowers fever"], ["Unrelated text"]])
    assert [j.support for j in judged] == [Support.SUPPORTED, Support.CONTRADICTED, Support.UNSUPPORTED]
    assert v.calls[0][1] == "Aspirin: lowers fever in adults"  # a passage's title goes before its text
    assert "P(SUPPORT)" in judged[0].raw and judged[0].error is None
