"""``retrieve_verify``: retrieve, then read every retrieved sentence with the verifier.

No LM decides anything: :meth:`RetrieveVerifyEnv.reset` searches the claim, scores each
sentence of the top ``top_k`` units (or each whole unit, ``granularity="unit"``) with the
cross-encoder verifier (``factrl-verifier`` by default, :mod:`factrl.verifier`), and
aggregates (:func:`~factrl.verifier.judge.aggregate_verdict`): REFUTE when the best
P(REFUTE) passes the refute threshold and beats the support margin, SUPPORT likewise,
else NOT ENOUGH INFO. The thresholds are the verifier's *agent* thresholds where its
manifest has them (chosen on validation claims for this best-of-many reading, which
needs surer probabilities than one pair), else its pair thresholds. The evidence is the
ids of the sentences past the threshold, best first; the confidence is the deciding
probability. The opening message shows the scored sentences, so the trajectory records
what was read.

It runs under the same episode machine as the LM agents: the model's one turn is ignored
(``verify``/``eval``/the demo give it a no-op LM,
:func:`~factrl.lm.scripted.null_lm`, so nothing is generated). Scored by ``veri_r1`` (label, evidence, format) like the baselines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.guards import EpisodeGuard, SearchLog, claim_text
from factrl.envs.spec import EnvDeps
from factrl.types import Claim, Hit, Message, Verdict

__all__ = ["RetrieveVerifyConfig", "RetrieveVerifyEnv"]

@dataclass(frozen=True)
class RetrieveVerifyConfig:
    top_k: int = 3  # units retrieved
    granularity: str = "sentence"  # score each sentence of a unit, or each unit whole
    verifier: str = "factrl-verifier"
    with_title: bool = False  # put "Title: " before each scored text (Wikipedia-style corpora)
    support_threshold: float | None = None  # None: the verifier's agent thresholds, else its pair thresholds
    refute_threshold: float | None = None
    max_evidence: int = 3
    precision: str = "auto"  # bf16 where native, else fp32; or "fp32", "bf16", "int8"
    max_query_chars: int = 500

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.max_evidence < 1:
            raise ValueError(f"top_k and max_evidence must be >= 1, got {self.top_k}, {self.max_evidence}")
        if self.granularity not in ("sentence", "unit"):
            raise ValueError(f"granularity must be 'sentence' or 'unit', got {self.granularity!r}")


def _texts(hits: list[Hit], config: RetrieveVerifyConfig) -> tuple[list[str], list[str], list[str]]:
    """``(ids, texts, units)`` of what is scored: each sentence (with its evidence id) or
    unit, and the unit each comes from."""
    ids, texts, units = [], [], []
    for h in hits:
        p = h.passage
        parts = (list(zip(p.sentence_ids, p.sentences)) if config.granularity == "sentence" and p.sentences
                 else [(p.id, p.text)])
        for sid, text in parts:
            ids.append(sid)
            texts.append(f"{p.title}: {text}" if config.with_title and p.title else text)
            units.append(p.id)
    return ids, texts, units


class RetrieveVerifyEnv(EpisodeGuard):
    name = "retrieve_verify"
    stop: tuple[str, ...] = ()
    max_turns = 1
    default_reward = "veri_r1"
    lm_free = True

    def __init__(self, retriever: Any, verifier: Any, config: RetrieveVerifyConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the retrieve_verify agent needs a retriever (--index)")
        self.retriever, self.verifier, self.config = retriever, verifier, config or RetrieveVerifyConfig()
        self._decided: EpisodeResult | None = None

    def _thresholds(self) -> Any:
        from factrl.verifier.scoring import Thresholds

        base = getattr(self.verifier, "agent_thresholds", None) or self.verifier.thresholds
        c = self.config
        return Thresholds(support=base.support if c.support_threshold is None else c.support_threshold,
                          refute=base.refute if c.refute_threshold is None else c.refute_threshold)

    def reset(self, claim: Claim) -> list[Message]:
        from factrl.verifier.judge import aggregate_verdict

        claim_text(claim)
        query = claim.text.strip()[: self.config.max_query_chars]
        t0 = time.perf_counter()
        hits = self.retriever.search([query], self.config.top_k)[0]
        t1 = time.perf_counter()
        ids, texts, units = _texts(hits, self.config)
        probs = self.verifier.predict([claim.text] * len(texts), texts)
        t2 = time.perf_counter()
        th = self._thresholds()
        v = aggregate_verdict(probs, ids, th, max_evidence=self.config.max_evidence)
        scored = [{"id": i, "unit": u, "support": round(float(p[0]), 4), "refute": round(float(p[1]), 4),
                   "nei": round(float(p[2]), 4)} for i, u, p in zip(ids, units, probs)]
        log = SearchLog()
        log.record(query, [h.passage.id for h in hits], t1 - t0)
        decided = log.episode_result(
            Verdict(label=v.label, evidence_ids=v.evidence_ids, format_ok=True, answered=True),
            timings={"verify_s": t2 - t1},
            meta={"confidence": v.confidence, "p_support": v.p_support, "p_refute": v.p_refute,
                  "verifier": getattr(self.verifier, "name", "verifier"), "scored": scored,
                  "thresholds": {"support": th.support, "refute": th.refute}})
        self._begin(claim)
        self._decided = decided
        lines = [f"[[{i}]] S={p[0]:.2f} R={p[1]:.2f} N={p[2]:.2f}: {t}" for i, p, t in zip(ids, probs, texts)]
        content = (f"Claim: {claim.text.strip()}\nRetrieved and verified ({len(ids)}):\n" + "\n".join(lines)
                   + f"\nVerdict: {v.label.value} (confidence {v.confidence:.2f})")
        return [Message(role="user", content=content)]

    def _step(self, model_text: str) -> StepResult:
        return StepResult(observation=None, done=True)

    def _episode_result(self) -> EpisodeResult:
        assert self._decided is not None  # set with the claim, in reset
        return self._decided

    def parse_verdict(self, model_text: str) -> Verdict:
        # The verdict is the verifier's, decided in reset; text alone cannot give it.
        return self._decided.verdict if self._decided is not None else Verdict()


@ENVS.register("retrieve_verify")
def make_retrieve_verify(deps: EnvDeps | None = None, **params: object) -> RetrieveVerifyEnv:
    """``params`` are :class:`RetrieveVerifyConfig` fields; searches ``deps.retriever``;
    the verifier is ``deps.lms["verifier"]`` when given, else loaded by name (once per
    process)."""
    deps = deps or EnvDeps()
    config = RetrieveVerifyConfig(**params)  # type: ignore[arg-type]
    verifier = deps.lms.get("verifier") if deps.lms else None
    if verifier is None:
        from factrl.verifier.asset import VerifierAssetError, load_verifier

        try:
            verifier = load_verifier(config.verifier, precision=config.precision)
        except VerifierAssetError as exc:  # a set-up problem: the caller reports it as such
            raise ValueError(f"retrieve_verify: {exc}") from None
    return RetrieveVerifyEnv(deps.retriever, verifier, config)


make_retrieve_verify.lm_free = True  # type: ignore[attr-defined]
