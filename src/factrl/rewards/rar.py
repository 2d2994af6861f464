"""Binary RAR's reward (001, §3.3, App. D): r(x, y) = 1 when an LM verifier finds no
contradiction between the response and evidence retrieved for (prompt, response), else 0.

Evidence: the top ``k`` (8) chunks of the prompt's pre-cached documents, cut into
``chunk_tokens`` (512) token chunks and searched with BM25 for the prompt and the
response together (:class:`~factrl.retrieval.pools.EvidencePools`). The documents come
from, in order: a pools JSONL file (``pools=PATH``), the prompt's own ``documents``
(:mod:`factrl.datasets.rar_prompts`), or the retriever in :class:`RewardDeps`. A prompt
with none of these is an error naming it, not an empty evidence list.

The verifier is ``RewardDeps.lms["verifier"]`` (any LM backend; the paper used
Qwen3-32B), one pass per response with Figure 9's prompt (:mod:`factrl.rewards.rar_verifier`);
or the trained cross-encoder (``verifier = "factrl-verifier"``, :mod:`factrl.verifier`):
a response contradicts when any of its sentences against any retrieved chunk has a
calibrated P(REFUTE) past ``refute_threshold`` (the verifier's, chosen on validation).
``rar_rating`` is Figure 10's 0–10 variant, scaled to [0, 1].

Failures are counted, never silently scored: an output the parser cannot read is
``verifier_failed`` = 1 and gets ``on_parse_failure``'s reward — by default the mean of
the parsed rewards of the same prompt in the batch, so it adds no advantage in its GRPO
group (no signal, not a penalty and not a gift; the mean is over the episodes scored in
one batch, so keep ``rollout.batch_size`` a multiple of the group size); ``"zero"`` or
``"one"`` instead. An
empty response (``empty_response``) and a failed episode (``episode_error``) score 0
without a verifier call, and so does a response that never stopped (``nonstop``: cut at
the token budget, no EOS) — App. A.5's non-stop sequence penalty (``nonstop_penalty``;
the paper gives no value, so the binary reward's 0).

Training data (App. C): prompts with fewer than ``min_documents`` (3) pre-cached
documents are discarded (:meth:`RarReward.training_claims`, applied by the GRPO trainer).
The hallucination evaluation searches with its own depth and chunking
(:meth:`RarReward.with_evidence`; App. B.1: top-10 chunks of 100 words).

``convention = "released"`` computes the reward as the authors' released code does
instead (:mod:`factrl.rewards.rar_released`: the response alone as the query, rank_bm25
Okapi over token windows, the released prompt, thinking off, ``json.loads`` or 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from factrl.lm.base import GenerationConfig
from factrl.rewards.base import REWARDS, RewardDeps
from factrl.rewards.rar_verifier import VerifierOutput, strip_think, verify, verify_by_choice
from factrl.types import Claim, Passage, RewardBreakdown, Trajectory

__all__ = ["RarReward", "NoEvidenceError", "PARSE_FAILURE_POLICIES"]

PARSE_FAILURE_POLICIES = ("group_mean", "zero", "one")
CONVENTIONS = ("paper", "released")


class NoEvidenceError(ValueError):
    """A prompt has no documents to verify its responses against."""


@dataclass
class _Cache:
    pools: Any = None  # EvidencePools, built on first use
    codec: Any = None  # released: the tokenizer that cuts documents
    released: dict[str, Any] = field(default_factory=dict)  # released: claim id → ReleasedEvidence


@dataclass(frozen=True)
class RarReward:
    rating: bool = False
    k: int = 8
    chunk_tokens: int = 512
    pools: str | None = None
    on_parse_failure: str = "group_mean"
    max_new_tokens: int | None = None  # the verifier's; None: 1,024 (paper), 512 (released)
    mode: str = "generate"  # or "choice": score the two answers instead of sampling (binary only)
    margin: float = 0.0  # choice mode: SCORE 1 needs logprob(1) - logprob(0) >= margin
    nonstop_penalty: bool = True  # a response cut at the budget (no EOS) scores 0 (App. A.5)
    min_documents: int = 3  # training prompts need this many cached documents (App. C)
    convention: str = "paper"  # or "released": the authors' released code (rar_released)
    chunk_tokenizer: str | None = None  # released: what cuts documents (default: the verifier's tokenizer)
    verifier_temperature: float | None = None  # None: 0 (paper, greedy), 1.0 (released, tinker's default)
    verifier_thinking: bool | None = None  # None: allowed (paper), disabled (released)
    refute_threshold: float | None = None  # a cross-encoder verifier: P(REFUTE) that contradicts (None: its own)
    name: str = "rar"
    verifier: Any = field(default=None, repr=False, compare=False)
    retriever: Any = field(default=None, repr=False, compare=False)
    _cache: _Cache = field(default_factory=_Cache, repr=False, compare=False)
    diagnostics: ClassVar[tuple[str, ...]] = ("verifier_failed", "empty_response", "episode_error", "nonstop")
    lm_roles: ClassVar[tuple[str, ...]] = ("verifier",)  # LMs a trainer must provide

    def __post_init__(self) -> None:
        if self.on_parse_failure not in PARSE_FAILURE_POLICIES:
            raise ValueError(f"on_parse_failure must be one of {PARSE_FAILURE_POLICIES}, got {self.on_parse_failure!r}")
        if self.mode not in ("generate", "choice") or (self.mode == "choice" and self.rating):
            raise ValueError(f"mode must be 'generate' or (binary only) 'choice', got {self.mode!r}")
        if self.k < 1 or self.chunk_tokens < 1:
            raise ValueError(f"k and chunk_tokens must be >= 1, got {self.k}, {self.chunk_tokens}")
        if self.margin != 0.0 and self.mode != "choice":
            raise ValueError(f"margin applies to mode='choice' only (mode is {self.mode!r})")
        if self.refute_threshold is not None and not 0.0 <= self.refute_threshold <= 1.0:
            raise ValueError(f"refute_threshold must be in [0, 1], got {self.refute_threshold}")
        if self.min_documents < 0:
            raise ValueError(f"min_documents must be >= 0, got {self.min_documents}")
        if self.convention not in CONVENTIONS:
            raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {self.convention!r}")
        if self.convention == "released" and (self.rating or self.mode != "generate"):
            raise ValueError("the released convention is the binary reward, generated (no rating, no choice mode)")
        if self.convention == "paper" and (self.chunk_tokenizer is not None or self.verifier_thinking is not None):
            raise ValueError("chunk_tokenizer and verifier_thinking apply to the released convention only")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    @property
    def components(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("rating",) if self.rating else ("no_contradiction",)

    # -- evidence ------------------------------------------------------------------

    def _pools(self) -> Any:
        if self._cache.pools is None:
            from factrl.retrieval.pools import EvidencePools

            self._cache.pools = (EvidencePools.load_jsonl(self.pools, chunk_tokens=self.chunk_tokens) if self.pools
                                 else EvidencePools(chunk_tokens=self.chunk_tokens))
        return self._cache.pools

    def evidence(self, traj: Trajectory, query: str, k: int | None = None) -> list[Passage]:
        """The top ``k`` (default ``self.k``) chunks of the prompt's documents for
        ``query`` (the reward asks with prompt + response; the evaluation with one
        atomic claim)."""
        k = self.k if k is None else k
        pools = self._pools()
        cid = traj.claim.id
        if cid not in pools and traj.claim.meta.get("documents"):
            pools.add(cid, traj.claim.meta["documents"], claim=traj.claim.text)
        if cid in pools:
            return [h.passage for h in pools.search(cid, [query], k)[0]]
        if self.retriever is not None:
            return [h.passage for h in self.retriever.search([query], k)[0]]
        where = f"the pools file {self.pools}" if self.pools else "no pools file was given"
        raise NoEvidenceError(f"prompt {cid!r} has no documents to verify against ({where}, the prompt has no "
                              "'documents', and the reward has no retriever)")

    def documents(self, claim: Claim) -> list[dict[str, str]]:
        """The prompt's cached documents as ``{"title", "text"}`` (a pools file's, else
        its own); a NoEvidenceError when it has none."""
        pools = self._pools()
        if claim.id in pools:
            return [{"title": d.title, "text": d.text} for d in pools.documents(claim.id)]
        own = claim.meta.get("documents") or []
        if not own:
            where = f"the pools file {self.pools}" if self.pools else "no pools file was given"
            raise NoEvidenceError(f"prompt {claim.id!r} has no documents to verify against ({where}, and the "
                                  "prompt has no 'documents'; the released convention searches only those)")
        return [{"title": str(d.get("title") or ""), "text": str(d.get("text") or "")} for d in own]

    def released_evidence(self, traj: Trajectory) -> Any:
        """The released convention's chunks and index of the prompt's documents, built
        on first use with the verifier's tokenizer (or ``chunk_tokenizer``)."""
        from factrl.rewards.rar_released import ReleasedEvidence, load_chunk_codec, released_chunks

        cid = traj.claim.id
        if cid not in self._cache.released:
            if self._cache.codec is None:
                self._cache.codec = load_chunk_codec(self.chunk_tokenizer, self.verifier)
            chunks = released_chunks(self.documents(traj.claim), self._cache.codec, self.chunk_tokens)
            self._cache.released[cid] = ReleasedEvidence(chunks)
        return self._cache.released[cid]

    def with_evidence(self, *, k: int, chunk_tokens: int) -> RarReward:
        """This reward searching the same documents for the top ``k`` chunks of
        ``chunk_tokens`` words (pools of its own): the evaluation's evidence (App. B.1:
        10 chunks of 100 words) beside the reward's (8 of 512)."""
        return replace(self, k=int(k), chunk_tokens=int(chunk_tokens), _cache=_Cache())

    def document_count(self, claim: Claim) -> int | None:
        """How many cached documents ``claim`` has (a pools file's, else its own); None
        when its evidence comes from a retriever over a whole datastore."""
        pools = self._pools()
        if claim.id in pools:
            return len(pools.documents(claim.id))
        own = claim.meta.get("documents") or []
        if not own and self.retriever is not None:
            return None
        return len(own)

    def training_claims(self, claims: Sequence[Claim]) -> list[Claim]:
        """The prompts with at least ``min_documents`` documents (App. C: "instances with
        fewer than three retrieved documents are discarded"), in order; a ValueError when
        none is left."""
        # the released code skips only prompts with no documents
        least = 1 if self.convention == "released" else self.min_documents
        kept = [c for c in claims if (n := self.document_count(c)) is None or n >= least]
        if claims and not kept:
            raise ValueError(f"no training prompt has at least {least} documents "
                             f"({len(claims)} prompts; lower reward.params.min_documents to keep them)")
        return kept

    # -- scoring -------------------------------------------------------------------

    def verify_trajectories(self, trajectories: Sequence[Trajectory]) -> list[VerifierOutput | None]:
        """The verifier's reading of each trajectory's response; None where no call was
        made (a failed episode, an empty response)."""
        if self.verifier is None:
            raise RuntimeError(f"reward {self.name!r} needs a verifier LM: build it with "
                               "RewardDeps(lms={'verifier': lm}) (training: reward.verifier; eval: --verifier)")
        todo = [(i, t, strip_think(t.model_text)) for i, t in enumerate(trajectories)]
        todo = [(i, t, r) for i, t, r in todo if t.error is None and r and not self._nonstop(t)]
        rows = ([t.claim.text for _, t, _ in todo], [r for _, _, r in todo],
                [self.evidence(t, f"{t.claim.text}\n{r}") for _, t, r in todo])
        if not todo:
            outs = []
        elif _is_pair_verifier(self.verifier):  # the trained cross-encoder (verifier=factrl-verifier)
            outs = _cross_encoder_outputs(self.verifier, [r for _, _, r in todo], rows[2], rating=self.rating,
                                          threshold=self.refute_threshold)
        elif self.mode == "choice":
            outs = verify_by_choice(self.verifier, *rows, margin=self.margin)
        else:
            outs = verify(self.verifier, *rows, rating=self.rating,
                          config=GenerationConfig(max_new_tokens=self.max_new_tokens or 1024,
                                                  temperature=self.verifier_temperature or 0.0))
        result: list[VerifierOutput | None] = [None] * len(trajectories)
        for (i, _, _), out in zip(todo, outs):
            result[i] = out
        return result

    def _nonstop(self, traj: Trajectory) -> bool:
        """The response never stopped (its last model turn hit the token budget)."""
        if not self.nonstop_penalty:
            return False
        last = next((t for t in reversed(traj.turns) if t.source == "model"), None)
        return last is not None and last.finish_reason == "length"

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        trajs = list(trajectories)
        if self.convention == "released":
            if _is_pair_verifier(self.verifier):
                raise ValueError("the released convention's verifier is an LM reading the released prompt; "
                                 "a cross-encoder verifier (factrl-verifier) takes convention = 'paper'")
            from factrl.rewards.rar_released import score_released

            return score_released(self, trajs)
        outs = self.verify_trajectories(trajs) if trajs else []
        top = 10.0 if self.rating else 1.0
        key = self.components[0]
        values: list[float | None] = []
        for t, out in zip(trajs, outs):
            values.append(0.0 if out is None else (out.score / top if out.score is not None else None))
        by_prompt: dict[str, list[float]] = {}
        for t, out, v in zip(trajs, outs, values):
            if out is not None and v is not None:
                by_prompt.setdefault(t.claim.id, []).append(v)
        breakdowns = []
        for t, out, v in zip(trajs, outs, values):
            failed = out is not None and v is None
            if failed:
                v = self._fill(by_prompt.get(t.claim.id, []))
            assert v is not None
            comps = {
                key: v,
                "verifier_failed": float(failed),
                "empty_response": float(out is None and t.error is None and not self._nonstop(t)),
                "episode_error": float(t.error is not None),
                "nonstop": float(t.error is None and self._nonstop(t)),
                "total": v,
            }
            breakdowns.append(RewardBreakdown(components=comps, total=v))
        return breakdowns

    def _fill(self, parsed: list[float]) -> float:
        if self.on_parse_failure == "one":
            return 1.0
        if self.on_parse_failure == "group_mean" and parsed:
            return sum(parsed) / len(parsed)
        return 0.0  # "zero", or a group where nothing parsed (any constant adds no advantage)

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        return self.score([traj])[0]

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> RarReward:
        """Parameters: ``k``, ``chunk_tokens``, ``pools`` (a pools JSONL path),
        ``on_parse_failure``, ``max_new_tokens``, ``mode`` (``generate``; ``choice`` scores
        the two answers instead, for small verifiers), ``margin`` (choice mode: the
        logprob margin the "no contradiction" answer needs, a calibration for verifiers
        that prefer it everywhere), ``nonstop_penalty`` (a response cut at the budget
        scores 0), ``min_documents`` (training prompts need that many documents),
        ``convention`` (``paper`` | ``released``), ``chunk_tokenizer``,
        ``verifier_temperature``, ``verifier_thinking`` (the verifier call's settings, each
        defaulting to its convention's),
        ``refute_threshold`` (a cross-encoder verifier, e.g. ``factrl-verifier``: the
        calibrated P(REFUTE) of any response sentence against any chunk that makes a
        contradiction; default the verifier's own, chosen on validation);
        ``deps.lms["verifier"]`` is the verifier, ``deps.retriever`` a fallback evidence
        source."""
        extra: dict[str, Any] = {}
        if deps is not None:
            if deps.lms.get("verifier") is not None:
                extra["verifier"] = deps.lms["verifier"]
            if deps.retriever is not None:
                extra["retriever"] = deps.retriever
        unknown = set(params) - {"k", "chunk_tokens", "pools", "on_parse_failure", "max_new_tokens", "mode", "margin",
                                 "nonstop_penalty", "min_documents", "convention", "chunk_tokenizer",
                                 "verifier_temperature", "verifier_thinking", "refute_threshold"}
        if unknown:
            raise TypeError(f"unknown parameter(s) {sorted(unknown)}")
        return replace(self, **dict(params), **extra, _cache=_Cache())


def _is_pair_verifier(verifier: Any) -> bool:
    from factrl.verifier.scoring import PairVerifier

    return isinstance(verifier, PairVerifier)


def _cross_encoder_outputs(verifier: Any, responses: Sequence[str], evidence: Sequence[Sequence[Passage]], *,
                           rating: bool, threshold: float | None) -> list[VerifierOutput]:
    """A cross-encoder's reading as the LM verifier's output: SCORE 0 when a response
    sentence against a chunk has P(REFUTE) at or past the threshold (binary), or
    round(10·(1 − max P(REFUTE))) (rating)."""
    from factrl.verifier.judge import response_contradictions

    chunks = [[f"{p.title}: {p.text}" if p.title else p.text for p in ev] for ev in evidence]
    out = []
    for c in response_contradictions(verifier, responses, chunks, threshold=threshold):
        why = (f"P(REFUTE) = {c.p_refute:.3f} (threshold {c.threshold:.3f})"
               + (f" for {c.sentence!r} against chunk {c.chunk + 1}" if c.chunk is not None else ""))
        score = round(10 * (1 - c.p_refute)) if rating else int(not c.contradicts)
        out.append(VerifierOutput(score, why, None, why))
    return out


REWARDS.register("rar")(RarReward())
REWARDS.register("rar_rating")(RarReward(rating=True, name="rar_rating"))
