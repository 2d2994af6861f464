"""What the verifier's probabilities mean to the rest of factrl: one rule each for a
response, a claim, and a retrieved set of units.

- :func:`response_contradictions` (Binary RAR's reward with ``verifier=factrl-verifier``):
  a response *contradicts* its evidence when any (response sentence, chunk) pair has a
  calibrated P(REFUTE) at or above the threshold chosen on validation;
- :func:`judge_statement` (the long-form judge, HARIS's low-level judge): a claim is
  *contradicted* when its best P(REFUTE) over the passages passes the refute threshold,
  *supported* when its best P(SUPPORT) passes the support threshold (the larger margin
  wins when both do), else *unsupported*;
- :func:`aggregate_verdict` (the ``retrieve_verify`` agent): the same rule over retrieved
  units, giving a label, the units behind it and a confidence.

All scoring goes through one batched ``predict`` call per function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from factrl.labels import Label
from factrl.verifier.scoring import PairVerifier, Thresholds

__all__ = ["Contradiction", "StatementJudgement", "UnitVerdict", "aggregate_verdict", "judge_claims_by_verifier",
           "judge_statement", "judge_statements", "response_contradictions", "response_sentences"]

S, R, N = 0, 1, 2  # columns of VERIFIER_LABELS


def response_sentences(text: str, *, max_sentences: int = 16) -> list[str]:
    """A response's sentences (the whole text when it has none), at most ``max_sentences``."""
    from factrl.corpus.sentences import split_sentences

    text = text.strip()
    sentences = [s for s in split_sentences(text) if s.strip()] or ([text] if text else [])
    return sentences[:max_sentences]


@dataclass(frozen=True)
class Contradiction:
    """The strongest contradiction found in one response: P(REFUTE), the sentence and the
    chunk index; ``contradicts`` is P(REFUTE) ≥ threshold."""

    contradicts: bool
    p_refute: float
    sentence: str = ""
    chunk: int | None = None
    threshold: float = 0.5


def response_contradictions(verifier: PairVerifier, responses: Sequence[str], evidence: Sequence[Sequence[str]],
                            *, threshold: float | None = None, max_sentences: int = 16) -> list[Contradiction]:
    """One :class:`Contradiction` per response: each of its sentences against each of its
    evidence chunks (a response without sentences or evidence contradicts nothing)."""
    if len(responses) != len(evidence):
        raise ValueError(f"{len(responses)} responses but {len(evidence)} evidence lists")
    t = verifier.thresholds.refute if threshold is None else float(threshold)
    rows: list[tuple[int, str, int]] = []
    claims: list[str] = []
    texts: list[str] = []
    for i, (response, chunks) in enumerate(zip(responses, evidence)):
        for sentence in response_sentences(response, max_sentences=max_sentences):
            for j, chunk in enumerate(chunks):
                rows.append((i, sentence, j))
                claims.append(sentence)
                texts.append(chunk)
    probs = verifier.predict(claims, texts) if rows else np.zeros((0, 3))
    best: list[Contradiction] = [Contradiction(False, 0.0, threshold=t) for _ in responses]
    for (i, sentence, j), p in zip(rows, probs[:, R] if len(rows) else []):
        if p > best[i].p_refute or best[i].chunk is None:
            best[i] = Contradiction(bool(p >= t), float(p), sentence, j, t)
    return best


@dataclass(frozen=True)
class StatementJudgement:
    """A claim against passages: ``label`` is SUPPORT, REFUTE or NOT ENOUGH INFO;
    ``p_support``/``p_refute`` are the best over passages, ``passage`` the index behind
    the label (None for NOT ENOUGH INFO)."""

    label: Label
    p_support: float
    p_refute: float
    passage: int | None = None
    probabilities: list[list[float]] = field(default_factory=list, repr=False)


def _decide(probs: np.ndarray, thresholds: Thresholds) -> StatementJudgement:
    if not len(probs):
        return StatementJudgement(Label.NEI, 0.0, 0.0)
    js, jr = int(probs[:, S].argmax()), int(probs[:, R].argmax())
    ps, pr = float(probs[js, S]), float(probs[jr, R])
    margin_s, margin_r = ps - thresholds.support, pr - thresholds.refute
    if margin_r >= 0 and margin_r >= margin_s:
        label, at = Label.REFUTE, jr
    elif margin_s >= 0:
        label, at = Label.SUPPORT, js
    else:
        label, at = Label.NEI, None
    return StatementJudgement(label, ps, pr, at, probs.tolist())


def judge_statements(verifier: PairVerifier, statements: Sequence[str], passages: Sequence[Sequence[str]],
                     *, thresholds: Thresholds | None = None) -> list[StatementJudgement]:
    """:func:`judge_statement` for many statements in one scoring call."""
    if len(statements) != len(passages):
        raise ValueError(f"{len(statements)} statements but {len(passages)} passage lists")
    th = thresholds or verifier.thresholds
    claims = [s for s, ps in zip(statements, passages) for _ in ps]
    texts = [p for ps in passages for p in ps]
    probs = verifier.predict(claims, texts) if claims else np.zeros((0, 3))
    out, at = [], 0
    for ps in passages:
        out.append(_decide(probs[at : at + len(ps)], th))
        at += len(ps)
    return out


def judge_statement(verifier: PairVerifier, statement: str, passages: Sequence[str], *,
                    thresholds: Thresholds | None = None) -> StatementJudgement:
    return judge_statements(verifier, [statement], [passages], thresholds=thresholds)[0]


@dataclass(frozen=True)
class UnitVerdict:
    """The ``retrieve_verify`` agent's conclusion: label, the ids of the units that carry
    it (the best one first, then others past the same threshold, at most ``max_evidence``),
    and a confidence (the deciding probability; for NOT ENOUGH INFO, 1 − the larger of
    the best P(SUPPORT) and P(REFUTE))."""

    label: Label
    evidence_ids: list[str]
    confidence: float
    p_support: float
    p_refute: float


def aggregate_verdict(probs: np.ndarray, unit_ids: Sequence[str], thresholds: Thresholds, *,
                      max_evidence: int = 3) -> UnitVerdict:
    """The verdict over units scored against one claim (rows of ``probs`` align with
    ``unit_ids``)."""
    probs = np.asarray(probs, dtype=np.float64).reshape(-1, 3)
    if len(probs) != len(unit_ids):
        raise ValueError(f"{len(probs)} probability rows but {len(unit_ids)} unit ids")
    j = _decide(probs, thresholds)
    if j.label == Label.NEI:
        return UnitVerdict(Label.NEI, [], 1.0 - max(j.p_support, j.p_refute), j.p_support, j.p_refute)
    col, t = (S, thresholds.support) if j.label == Label.SUPPORT else (R, thresholds.refute)
    order = [int(i) for i in np.argsort(-probs[:, col], kind="stable") if probs[int(i), col] >= t]
    ids = list(dict.fromkeys(unit_ids[i] for i in order))[:max_evidence]
    return UnitVerdict(j.label, ids, float(probs[order[0], col]), j.p_support, j.p_refute)


def judge_claims_by_verifier(verifier: PairVerifier, claims: Sequence[str],
                             evidence: Sequence[Sequence[object]]) -> list:
    """Binary RAR's long-form judge with the cross-encoder: each atomic claim against its
    own passages (:func:`judge_statements`) as a
    :class:`~factrl.metrics.hallucination.JudgedClaim` (supported / contradicted /
    unsupported); ``raw`` keeps the best P(SUPPORT) and P(REFUTE)."""
    from factrl.metrics.hallucination import JudgedClaim, Support
    from factrl.types import Passage

    def text(p: object) -> str:
        if isinstance(p, Passage):
            return f"{p.title}: {p.text}" if p.title else p.text
        return str(p)

    support = {Label.SUPPORT: Support.SUPPORTED, Label.REFUTE: Support.CONTRADICTED, Label.NEI: Support.UNSUPPORTED}
    judged = judge_statements(verifier, list(claims), [[text(p) for p in ev] for ev in evidence])
    return [JudgedClaim(c, support[j.label], None, f"P(SUPPORT) = {j.p_support:.3f}, P(REFUTE) = {j.p_refute:.3f}")
            for c, j in zip(claims, judged)]
