"""What one claim contributes to an update: FFRR's document- and question-level
episodes (§4.1–4.3) and REPLUG's KL term, each as (log π_θ(d|q), reward) samples or a loss.

Candidates D′ come from a frozen index (top ``candidates`` per query, cached); the LM's
label distributions are cached per (claim, documents), since the scorer is frozen and
exploitation keeps drawing the same top documents.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.lm.label_scores import LabelScorer
from factrl.retrieval.dense import passage_text
from factrl.train.ffrr.objectives import expected_reward_loss, replug_loss
from factrl.train.ffrr.policy import DualEncoderPolicy
from factrl.train.ffrr.sampling import pick_questions, run_doc_episode
from factrl.types import Passage

__all__ = ["Candidates", "ClaimOutcome", "ScoreCache", "doc_level", "exact_doc_level", "question_level",
           "replug_term"]


class Candidates:
    """Top-``k`` passages per query from a frozen retriever (``search(queries, k)``), cached.

    With ``vectors`` (the frozen index's document vectors, rows in passage order, and
    ``rows`` mapping passage id → row), :meth:`log_probs` scores candidates against those
    fixed vectors and trains the query side only; without, candidates are re-encoded by
    the policy at every call."""

    def __init__(self, retriever: Any, k: int, *, vectors: Any = None, rows: dict[str, int] | None = None) -> None:
        self.retriever = retriever
        self.k = int(k)
        # the frozen index's prefixes (E5: "query: " / "passage: "): the policy encodes
        # queries and candidates as the index did
        params = retriever.params() if hasattr(retriever, "params") else {}
        self.query_prefix = str(params.get("query_prefix") or "")
        self.passage_prefix = str(params.get("passage_prefix") or "")
        self.vectors, self.rows = vectors, rows
        self._cache: dict[str, list[Passage]] = {}
        self._scores: dict[str, list[float]] = {}

    def ref_log_probs(self, query: str, tau: float) -> Any:
        """log π_0(d|q) over ``get([query])[0]``: softmax of the frozen retriever's own
        scores / τ (the untrained policy, whose vectors the frozen index holds)."""
        import torch

        self.get([query])
        return torch.log_softmax(torch.tensor(self._scores[query], dtype=torch.float32) / tau, dim=-1)

    def log_probs(self, policy: DualEncoderPolicy, query: str, docs: Sequence[Passage], *, doc_grad: bool) -> Any:
        """log π_θ(d|q) over ``docs``."""
        q = self.query_prefix + query
        if self.vectors is None:
            return policy.candidate_log_probs(q, [self.passage_prefix + passage_text(p) for p in docs],
                                              doc_grad=doc_grad)
        import torch

        assert self.rows is not None
        d = torch.from_numpy(self.vectors[[self.rows[p.id] for p in docs]]).to(policy.device)
        return policy.log_probs(policy.embed([q])[0], d)

    def get(self, queries: Sequence[str]) -> list[list[Passage]]:
        todo = list(dict.fromkeys(q for q in queries if q not in self._cache))
        if todo:
            for q, hits in zip(todo, self.retriever.search(todo, self.k)):
                if not hits:
                    raise ValueError(f"the frozen index returned no candidates for {q[:80]!r}")
                self._cache[q] = [h.passage for h in hits]
                self._scores[q] = [float(h.score) for h in hits]
        return [self._cache[q] for q in queries]


class ScoreCache:
    """A row scorer (the label scorer, or the claim-likelihood one: ``probs(items)`` → one
    list of floats per item) behind a cache keyed by (claim text, passage ids); counts LM rows.

    With ``path``, every scored row is appended to that JSONL file as it is scored and the
    rows already there are loaded first, so a resumed or repeated run (or another method
    with the same scorer) never scores a row twice. ``fingerprint`` (the scorer's model,
    prompt form, label words, document cut) is kept beside it in ``PATH.meta.json``; a
    cache written by a different scorer is refused rather than silently reused. A torn
    last line (a crash mid-write) is skipped and counted in ``torn``."""

    def __init__(self, scorer: LabelScorer | Any, path: str | Path | None = None,
                 fingerprint: dict[str, Any] | None = None) -> None:
        self.scorer = scorer
        self.lm_rows = 0
        self.torn = 0
        self.path = Path(path) if path is not None else None
        self._cache: dict[tuple[str, tuple[str, ...]], list[float]] = {}
        if self.path is not None:
            self._open(fingerprint or {})

    def _open(self, fingerprint: dict[str, Any]) -> None:
        assert self.path is not None
        meta = self.path.with_name(self.path.name + ".meta.json")
        want = json.loads(json.dumps(fingerprint))
        if meta.exists():
            have = json.loads(meta.read_text(encoding="utf-8"))
            if have != want:
                raise ValueError(f"{self.path} holds scores of another scorer ({have}, this run: {want}); "
                                 "point scorer.cache elsewhere or delete it")
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            meta.write_text(json.dumps(want, indent=2) + "\n", encoding="utf-8")
        if self.path.exists():
            with self.path.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        row = json.loads(line)
                        self._cache[(row["claim"], tuple(row["docs"]))] = [float(x) for x in row["probs"]]
                    except (ValueError, KeyError, TypeError):
                        self.torn += 1

    def __len__(self) -> int:
        return len(self._cache)

    def has(self, claim: str, docs: Sequence[Passage]) -> bool:
        return (claim, tuple(p.id for p in docs)) in self._cache

    def probs(self, claim: str, doc_sets: Sequence[Sequence[Passage]]) -> list[list[float]]:
        keys = [(claim, tuple(p.id for p in docs)) for docs in doc_sets]
        firsts = {k: i for i, k in reversed(list(enumerate(keys)))}  # a key's first position
        todo = sorted(i for k, i in firsts.items() if k not in self._cache)
        if todo:
            rows = self.scorer.probs([(claim, [passage_text(p) for p in doc_sets[i]]) for i in todo])
            self.lm_rows += len(todo)
            lines = []
            for i, row in zip(todo, rows):
                self._cache[keys[i]] = row
                lines.append(json.dumps({"claim": claim, "docs": list(keys[i][1]), "probs": row}) + "\n")
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write("".join(lines))
        return [self._cache[k] for k in keys]

    def one(self, claim: str, docs: Sequence[Passage]) -> list[float]:
        return self.probs(claim, [docs])[0]


@dataclass
class ClaimOutcome:
    """One claim's part of an update: REINFORCE samples (log-probability tensors with
    their rewards), or a REPLUG loss term, plus what to log."""

    log_probs: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    loss: Any = None
    stats: dict[str, float] = field(default_factory=dict)
    questions: list[str] = field(default_factory=list)  # a question-level episode's picks q̃_i


def doc_level(policy: DualEncoderPolicy, cands: Candidates, scores: ScoreCache, claim: str, query: str,
              gold: int, rng: random.Random, *, epsilon: float, top_k: int, max_samples: int,
              final_reward: bool, doc_grad: bool, stop: bool = True, kl_coef: float = 0.0) -> ClaimOutcome:
    """§4.1: ε-greedy document sampling for ``query`` until the stopping rule; each sampled
    document's reward is its gold-label probability, plus r_g for the first k = min(K, κ).
    ``stop=False`` (a reward with no label, e.g. the claim likelihood: rows of one value,
    ``gold`` 0) samples ``max_samples`` documents. ``kl_coef > 0`` adds
    kl_coef · KL(π_θ ‖ π_0) over D′ as ``loss`` (π_0: the frozen retriever), so the
    optimum is π_0·exp(R / kl_coef) rather than the reward's own ranking."""
    (docs,) = cands.get([query])
    lp = cands.log_probs(policy, query, docs, doc_grad=doc_grad)
    probs = lp.detach().exp().tolist()
    ep = run_doc_episode(probs, gold, rng, lambda i: scores.one(claim, [docs[i]]),
                         lambda idx: scores.one(claim, [docs[i] for i in idx]),
                         epsilon=epsilon, top_k=top_k, max_samples=max_samples, stop=stop,
                         final=final_reward)
    out = ClaimOutcome()
    for n, (i, r) in enumerate(zip(ep.picked, ep.rewards)):
        out.log_probs.append(lp[i])
        out.rewards.append(r + (ep.final_reward if final_reward and n < len(ep.final_docs) else 0.0))
    if kl_coef > 0:
        out.loss = _kl_term(policy, cands, query, lp, kl_coef, out.stats)
    out.stats |= {"doc_reward": sum(ep.rewards) / len(ep.rewards), "final_reward": ep.final_reward,
                 "kappa": float(len(ep.picked)), "stopped": float(ep.stopped),
                 "explored": sum(ep.explored) / len(ep.explored)}
    return out


def _kl_term(policy: DualEncoderPolicy, cands: Candidates, query: str, lp: Any, kl_coef: float,
             stats: dict[str, float]) -> Any:
    """kl_coef · KL(π_θ ‖ π_0) over D′ (π_0: the frozen retriever's own scores / τ)."""
    ref = cands.ref_log_probs(query, policy.tau).to(lp.device)
    kl = (lp.exp() * (lp - ref)).sum()
    stats["kl"] = float(kl.detach())
    return kl_coef * kl


def exact_doc_level(policy: DualEncoderPolicy, cands: Candidates, scores: ScoreCache, claim: str, query: str,
                    gold: int, *, doc_grad: bool, kl_coef: float = 0.0) -> ClaimOutcome:
    """``ffrr.estimator = "exact"``: every candidate of D′ scored alone (its gold-label
    probability, or its one value for a label-free reward), and ``loss`` = −E_{d∼π_θ}[R]
    (+ kl_coef · KL(π_θ ‖ π_0)) — REINFORCE's expected gradient with no sampling."""
    (docs,) = cands.get([query])
    lp = cands.log_probs(policy, query, docs, doc_grad=doc_grad)
    rewards = [row[gold] for row in scores.probs(claim, [[d] for d in docs])]
    out = ClaimOutcome(loss=expected_reward_loss(lp, rewards))
    out.stats["doc_reward"] = sum(p * r for p, r in zip(lp.detach().exp().tolist(), rewards))
    out.stats["reward_spread"] = max(rewards) - min(rewards)
    if kl_coef > 0:
        out.loss = out.loss + _kl_term(policy, cands, query, lp, kl_coef, out.stats)
    return out


def question_level(policy: DualEncoderPolicy, cands: Candidates, scores: ScoreCache, claim: str,
                   questions: Sequence[str], gold: int, rng: random.Random, *, epsilon: float, k: int,
                   final_reward: bool, doc_grad: bool) -> ClaimOutcome:
    """§4.2: each question's top-1 document under π_θ, its reward r_q = score(gold | claim,
    top-1); k questions picked ε-greedily, lowest r_q first; r_g over their top-1 documents."""
    cand_lists = cands.get(list(questions))
    lps, tops = [], []
    for q, docs in zip(questions, cand_lists):
        lp = cands.log_probs(policy, q, docs, doc_grad=doc_grad)
        lps.append(lp)
        tops.append(int(lp.detach().argmax()))
    dists = scores.probs(claim, [[docs[t]] for docs, t in zip(cand_lists, tops)])
    r_q = [d[gold] for d in dists]
    chosen = pick_questions(r_q, k, rng, epsilon=epsilon)
    r_g = scores.one(claim, [cand_lists[i][tops[i]] for i in chosen])[gold]
    out = ClaimOutcome()
    for i in chosen:
        out.log_probs.append(lps[i][tops[i]])
        out.rewards.append(r_q[i] + (r_g if final_reward else 0.0))
    out.stats = {"question_reward": sum(r_q[i] for i in chosen) / len(chosen), "final_reward": r_g,
                 "questions": float(len(questions))}
    out.questions = [questions[i] for i in chosen]
    return out


def replug_term(policy: DualEncoderPolicy, cands: Candidates, scores: ScoreCache, claim: str, query: str,
                gold: int, *, n_docs: int, beta: float, doc_grad: bool) -> ClaimOutcome:
    """REPLUG (LM-supervised retrieval): KL between π_θ over its top ``n_docs`` of D′ and
    the LM's softmax(score(gold | claim, d) / β) over the same documents."""
    (docs,) = cands.get([query])
    lp = cands.log_probs(policy, query, docs, doc_grad=doc_grad)
    top = lp.detach().argsort(descending=True)[: min(n_docs, len(docs))].tolist()
    dists = scores.probs(claim, [[docs[i]] for i in top])
    lm = [d[gold] for d in dists]
    return ClaimOutcome(loss=replug_loss(lp[top], lm, beta=beta), stats={"doc_reward": sum(lm) / len(lm)})
